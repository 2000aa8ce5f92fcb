"""LLM judges for subsequent follow-through and backchannel stages 2-3, the LLM simulator
policy, and the request cache they share (docs/judges.md).

The harness needs only ``JudgePanel``: ``JudgePanel.from_options(...)`` builds it from option
values / environment; a panel without judges is valid and marks what needs a judge
NOT_JUDGED.
"""

from ..rules.speech import JudgeInputError
from .audio_judge import AudioJudge
from .cache import RequestCache
from .calls import ConfigError, Counters, RequestFailed, RetryPolicy
from .client import Answer, JudgeClient
from .panel import JudgePanel
from .simulator_llm import LLMSimulator

__all__ = ["AudioJudge", "Answer", "ConfigError", "Counters", "JudgeClient", "JudgeInputError",
           "JudgePanel", "LLMSimulator", "RequestCache", "RequestFailed", "RetryPolicy"]
