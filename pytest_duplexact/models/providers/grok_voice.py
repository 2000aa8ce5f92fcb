"""``--duplexact-model=grok-voice``: xAI's Grok Voice Agent API, an OpenAI Realtime dialect
(realtime_dialects.py holds what it shares with its sibling)."""

from .realtime_dialects import grok_voice

factory = grok_voice
