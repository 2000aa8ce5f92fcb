"""LLM judges for subsequent follow-through and backchannel stages 2-3 (docs/judges.md).

The harness needs only ``JudgePanel``: ``JudgePanel.from_options(...)`` builds it from option
values / environment; a panel without judges is valid and marks what needs a judge
NOT_JUDGED. The judges only answer prompts: which stage needs one is rules/scoring.py's call.
The request cache and the retry policy are the remote plumbing's (remote/), re-exported here
because a panel is built from them; the LLM simulator is a pipeline policy
(pipelines/simulator_llm.py).
"""

from ..remote.cache import RequestCache
from ..remote.calls import ConfigError, Counters, RequestFailed, RetryPolicy
from ..rules.speech import JudgeInputError
from .audio_judge import AudioJudge
from .client import Answer, JudgeClient
from .panel import JudgePanel

__all__ = ["AudioJudge", "Answer", "ConfigError", "Counters", "JudgeClient", "JudgeInputError",
           "JudgePanel", "RequestCache", "RequestFailed", "RetryPolicy"]
