"""Take turn, immediate execution: any substantive onset inside the condition's window
relative to the end of user speech (immediate [0, 0.5], delayed [0, 3.0], slight_overlap
[-1.0, 0.5] s); it need not be the first onset (SPEC §3, paper B.3)."""

from __future__ import annotations

from ..data.annotations import Annotations
from ..data.results import ImmediateResult, failure, success
from ..data.taxonomy import TAKE_TURN_WINDOWS
from ..data.timeline import Timeline
from .action_rule import Requirements, Rule, Trial
from .common import fmt_near, onsets_in, substantive
from .speech import model_from, user_text


def window(ann: Annotations, condition: str) -> tuple[float, float]:
    lo, hi = TAKE_TURN_WINDOWS[condition]
    return ann.user_end + lo, ann.user_end + hi


def immediate(ann: Annotations, tl: Timeline, condition: str) -> ImmediateResult:
    rlo, rhi = TAKE_TURN_WINDOWS[condition]
    lo, hi = window(ann, condition)
    subs = substantive(tl)
    hits = onsets_in(subs, lo, hi)
    rel = f"[{rlo:g}, {rhi:g}] s of user end ({ann.user_end:.2f} s)"
    if hits:
        onset = hits[0].start
        offset = fmt_near(onset - ann.user_end, rlo, rhi, sign="+")
        return success(f"substantive onset at {offset} s, inside {rel}",
                       window=(lo, hi), onset=onset)
    if subs:
        nearest = min(subs, key=lambda s: min(abs(s.start - lo), abs(s.start - hi)))
        offset = fmt_near(nearest.start - ann.user_end, rlo, rhi, sign="+")
        return failure(f"substantive onset at {offset} s, outside {rel}", window=(lo, hi),
                       onset=nearest.start)
    return failure(f"no substantive model speech at all (window {rel})", window=(lo, hi))


class TakeTurn(Rule):
    action = "take_turn"
    _requirements = Requirements(clips=("user",),
                                 annotations=("user_start", "user_end"), texts=("user",))

    def immediate(self, trial: Trial, judges) -> ImmediateResult:
        return immediate(trial.annotations, trial.timeline, trial.condition)

    def judge_fields(self, trial: Trial, imm: ImmediateResult) -> dict[str, str]:
        """B.3: the user utterance and the model's response from its qualifying onset on."""
        return {"condition_id": trial.instance.cond.prompt_id,
                "user_speech": user_text(trial.instance),
                "model_response": model_from(trial.timeline,
                                             imm.onset if imm.success else None)}


RULE = TakeTurn()
