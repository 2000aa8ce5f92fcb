"""The judges as the harness sees them: one object, built from options, never raising for a
judge's failure.

``ask_subsequent``: the text judge's subsequent follow-through on the paper's prompt, asked
by rules/scoring.py once the rule has not decided (``missing_text_judge`` says why it cannot
be). ``backchannel_stages``: stages 2 (text judge) and 3 (audio judge) of backchannel
immediate execution. A panel without judges is valid: what needs a judge is NOT_JUDGED, with
the reason; a judge that gives no usable answer makes JUDGE_ERROR.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np

from .. import rules
from ..data.annotations import Instance
from ..data.audio import SAMPLE_RATE
from ..data.results import SubsequentResult, Verdict
from ..data.timeline import Segment, Timeline
from ..remote import calls
from ..remote.cache import RequestCache
from ..rules.backchannel import Judgement
from . import prompts
from .audio_judge import AudioJudge
from .client import JudgeClient


class JudgePanel:
    """``JudgePanel()``, without judges, is the offline default: judged stages are NOT_JUDGED,
    rule-decided ones are still decided."""

    def __init__(self, text: JudgeClient | None = None, audio: AudioJudge | None = None,
                 cache: RequestCache | None = None, notes: Sequence[str] = ()):
        self.text = text
        self.audio = audio
        self.cache = cache
        self.notes = list(notes)  # why a judge is missing, for the report
        for judge in (text, audio):
            if judge is not None and judge.cache is None:
                judge.cache = cache

    def __repr__(self) -> str:
        return f"JudgePanel(text={self.text!r}, audio={self.audio!r})"

    # --- subsequent follow-through (rules/scoring.py decides when to ask) -------------------

    def missing_text_judge(self) -> str | None:
        """Why S cannot be judged (the NOT_JUDGED reason), or ``None`` with a text judge."""
        if self.text is not None:
            return None
        return "no text judge configured " + (self._why() or "(--duplexact-judge)")

    def ask_subsequent(self, action: str, fields: dict[str, str]) -> SubsequentResult:
        """The text judge's S on the action's paper prompt filled with ``fields`` (the rule's
        judge_fields): SUCCESS / FAILURE from its YES / NO, JUDGE_ERROR without an answer."""
        prompt = prompts.SUBSEQUENT[action]
        system, user = prompt.render(fields)
        answer = self.text.ask_yes_no(system, user)
        # whether the answer came from the cache is counted in the report's usage, not here:
        # a re-score from the cache must give byte-identical outcomes
        evidence = {"fields": fields, "prompt": prompt.source, "request_key": answer.key}
        if answer.error:
            return SubsequentResult(Verdict.JUDGE_ERROR, answer.error, judge=self.text.model,
                                    evidence=evidence)
        evidence["answer"] = "YES" if answer.verdict else "NO"
        verdict = Verdict.SUCCESS if answer.verdict else Verdict.FAILURE
        return SubsequentResult(verdict, f"judge: {evidence['answer']}: {answer.reason}",
                                judge=self.text.model, evidence=evidence)

    # --- backchannel immediate execution, stages 2 and 3 ---------------------------------

    def backchannel_stages(self, instance: Instance, timeline: Timeline, candidate: Segment,
                           candidate_audio: np.ndarray,
                           sample_rate: int = SAMPLE_RATE) -> tuple[Judgement, Judgement]:
        """(genuine, function) for rules.backchannel.immediate. The audio judge is asked only
        about a candidate the text judge confirmed as genuine; a missing judge gives an empty
        Judgement (not judged), a failed one a Judgement with ``error``."""
        if self.text is None:
            return Judgement(), Judgement()
        fields = rules.backchannel.genuine_fields(instance, timeline, candidate)
        system, user = prompts.BACKCHANNEL_GENUINE.render(fields)
        answer = self.text.ask_yes_no(system, user)
        if answer.error:
            return Judgement(error=answer.error), Judgement()
        genuine = Judgement(answer.verdict, answer.reason)
        if not answer.verdict or self.audio is None:
            return genuine, Judgement()
        fn = self.audio.classify(candidate_audio, sample_rate)
        if fn.error:
            return genuine, Judgement(error=fn.error)
        return genuine, Judgement(fn.function, fn.reason)

    def clear_unreached(self) -> None:
        """Called as an instance's scoring starts (run/harness.py): ``unreachable`` then
        speaks of this instance's requests only. A judge asked rarely (the audio judge, at
        backchannel stage 3) would otherwise keep an old failure to connect and have the
        other judge's answered errors taken for a judge that is gone."""
        for judge in (self.text, self.audio):
            if judge is not None:
                with judge._streak_lock:
                    judge.unreached = 0

    def unreachable(self):
        """The judge whose latest request for this instance could not connect at all (its
        ``model`` and ``endpoint_url``, never a key), or None. Stages keep a judge's failure
        as a JUDGE_ERROR verdict, so this is how the session tells a judge that is gone from
        one that answered badly (pytest_plugin/session.py stops the run after LOST_AFTER such
        instances in a row). Judges are asked from the pytest thread only (run/offload.py)."""
        for judge in (self.text, self.audio):
            if judge is not None and judge.unreached:
                return judge
        return None

    # --- report ---------------------------------------------------------------------------

    def stats(self) -> dict:
        """Models used and what they cost: for the report's judge section."""
        def one(judge):
            if judge is None:
                return None
            return {"model": judge.model, **judge.counters.as_dict()}

        cache = None
        if self.cache is not None:
            cache = {"dir": str(self.cache.root), **self.cache.stats.__dict__}
        return {"text_judge": one(self.text), "audio_judge": one(self.audio), "cache": cache,
                "models": [j.model for j in (self.text, self.audio) if j is not None],
                "notes": list(self.notes)}

    def _why(self) -> str:
        return f"({'; '.join(self.notes)})" if self.notes else ""

    @classmethod
    def from_options(cls, judge_model: str | None = None, audio_model: str | None = None,
                     base_url: str | None = None, audio_base_url: str | None = None,
                     cache_dir: str | Path | None = None, deadline: float | None = None,
                     max_attempts: int | None = None) -> "JudgePanel":
        """Build from option values; each ``None`` falls back to its environment variable
        (docs/judges.md), then to the paper's models. A model value of ``off`` disables that
        judge. Without OPENAI_API_KEY there are no judges (the notes say so, and every judged
        stage reports NOT_JUDGED with that reason). ``deadline``: seconds per question,
        retries included (calls.policy_for)."""
        policy = calls.policy_for(deadline, max_attempts)
        cache = RequestCache(cache_dir) if cache_dir else None
        notes: list[str] = []
        if not os.environ.get(calls.ENV_API_KEY):
            notes.append(f"{calls.ENV_API_KEY} is not set")
            return cls(None, None, cache, notes)
        text = audio = None
        if _off(judge_model, "DUPLEXACT_JUDGE_MODEL"):
            notes.append("text judge turned off")
        else:
            text = JudgeClient(judge_model, base_url=base_url, policy=policy)
        if _off(audio_model, "DUPLEXACT_AUDIO_JUDGE_MODEL"):
            notes.append("audio judge turned off")
        else:
            audio = AudioJudge(audio_model, base_url=audio_base_url or base_url, policy=policy)
        return cls(text, audio, cache, notes)

def _off(value: str | None, env: str) -> bool:
    return calls.turned_off(value if value is not None else os.environ.get(env))
