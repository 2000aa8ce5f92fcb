"""``--duplexact-model=qwen-omni-realtime``: Alibaba DashScope's Qwen-Omni Realtime, an OpenAI
Realtime dialect (realtime_dialects.py holds what it shares with its sibling)."""

from .realtime_dialects import qwen_omni_realtime

factory = qwen_omni_realtime
