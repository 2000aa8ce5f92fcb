"""The paper's Simulator Replay policy: an LLM (GPT-5.4) polled every 1 s decides when to
inject the prerecorded cue (paper C.2, SPEC §7). It sees the model's streaming transcript as
heard (aligned to playback, never ahead), the reference response and the cue; it decides only
*when*. The prompt is ours (prompts.SIMULATOR): the paper describes the inputs, not the text.

A failed request means "not now": the harness force-injects at the deadline, so an
unreachable simulator degrades to forced injection, counted in ``counters.errors``.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..data import taxonomy
from ..judges import prompts
from ..judges.client import DEFAULT_MODEL, ENV_BASE_URL, ENV_MODEL, JudgeClient
from ..remote import calls
from ..remote.cache import RequestCache
from .policy import SimulatorState

ENV_SIMULATOR_MODEL = "DUPLEXACT_SIMULATOR_MODEL"
ENV_SIMULATOR_BASE_URL = "DUPLEXACT_SIMULATOR_BASE_URL"

# A decision is only useful within about one poll interval: few, short attempts.
SIMULATOR_RETRY = calls.RetryPolicy(max_attempts=2, backoff_base=0.25, backoff_cap=0.5,
                                    retry_after_cap=1.0, timeout=10.0)


def cue_purpose(cond: taxonomy.Condition) -> str:
    """What the cue is for, shown to the decision model: its action record's (ours)."""
    record = taxonomy.RECORDS[cond.action]
    detail = cond.judge_context or f"{record.label}: {cond.label}."
    return f"{record.cue_purpose or ''} {detail}".strip()


def simulator_fields(state: SimulatorState) -> dict[str, str]:
    cond = state.condition
    since = state.speaking_since
    return {"action": cond.action, "condition_id": prompts.condition_id(cond),
            "cue_purpose": cue_purpose(cond), "cue": state.cue_text,
            "reference": state.reference, "heard": state.heard_transcript,
            "speaking_for": "" if since is None else f"{max(0.0, state.now - since):.1f} s"}


class LLMSimulator:
    """pipelines.policy.SimulatorPolicy backed by a chat model."""

    poll_interval = 1.0

    def __init__(self, model: str | None = None, *, base_url: str | None = None, **kw):
        kw.setdefault("policy", SIMULATOR_RETRY)
        self.client = JudgeClient(
            model or os.environ.get(ENV_SIMULATOR_MODEL) or os.environ.get(ENV_MODEL)
            or DEFAULT_MODEL,
            base_url=base_url or os.environ.get(ENV_SIMULATOR_BASE_URL)
            or os.environ.get(ENV_BASE_URL) or None, **kw)
        self.name = f"llm:{self.client.model}"
        self.decisions: list[tuple[float, bool | None, str]] = []  # (now, inject?, reason)

    @classmethod
    def from_options(cls, model: str | None = None, base_url: str | None = None,
                     cache_dir: str | Path | None = None) -> "LLMSimulator":
        """Build from option values (``None``: environment, then GPT-5.4). Asking for the LLM
        simulator without OPENAI_API_KEY is a configuration error (calls.ConfigError)."""
        return cls(model, base_url=base_url,
                   cache=RequestCache(cache_dir) if cache_dir else None)

    @property
    def counters(self) -> calls.Counters:
        return self.client.counters

    def decide(self, state: SimulatorState) -> bool:
        # Only while the model is audibly speaking and something has been heard: the cue must
        # overlap model speech, and an empty transcript gives the decision nothing to go on.
        if not state.model_speaking or not state.heard_transcript.strip():
            return False
        system, user = prompts.SIMULATOR.render(simulator_fields(state))
        answer = self.client.ask_yes_no(system, user)
        if answer.error:
            self.decisions.append((state.now, None, answer.error))
            return False
        self.decisions.append((state.now, answer.verdict, answer.reason))
        return bool(answer.verdict)
