"""The oracle on every bundled fixture instance: speech (by energy) exactly where the
instance's action expects it, and immediate success from the rules on that timeline."""

import pytest

from pytest_duplexact.data import taxonomy
from pytest_duplexact.data.instance import HEADER, bundled_root, load_dataset
from pytest_duplexact.data.results import Verdict
from pytest_duplexact.models import resolve_model
from pytest_duplexact.pipelines import run_instance
from pytest_duplexact.rules import requires, scoring
from tests.pipelines.helpers import run, spans, speech_in, timeline_of


def _bundled():
    root = bundled_root()
    if not (root / HEADER).is_file():
        return []
    return list(load_dataset(root, requires=requires).instances)


INSTANCES = _bundled()


def _onsets(rec):
    return [a for a, _ in spans(rec.output)]


def expect_speech(inst, rec) -> None:
    """Energy checks of the oracle's behaviour per action (SPEC §3 windows)."""
    ann, out = inst.annotations, rec.output
    if inst.action == "wait":
        lo, hi = (ann.user_start, ann.user_end) if inst.condition == "continuous_speech" \
            else (ann.pause_start, ann.pause_end)
        assert speech_in(out, lo, hi) == 0.0
        assert _onsets(rec)[0] >= ann.user_end
    elif inst.action == "ignore":
        assert speech_in(out, ann.other_start, ann.other_end) == 0.0
        assert _onsets(rec)[0] >= ann.user_end
    elif inst.action == "take_turn":
        lo, hi = taxonomy.TAKE_TURN_WINDOWS[inst.condition]
        assert ann.user_end + lo <= _onsets(rec)[0] <= ann.user_end + hi
    elif inst.action == "backchannel":
        (a, b), (c, _) = spans(out)[:2]
        assert ann.user_start <= a <= ann.user_end and b - a < 1.5 and c >= ann.user_end
    elif inst.action == "interrupt":
        assert ann.user_start <= _onsets(rec)[0] <= ann.user_end - taxonomy.INTERRUPT_END_MARGIN_S
        assert rec.user_sent_until < ann.user_end
    elif inst.action == "hold_floor":
        lo, hi = rec.cue.start, rec.cue.end + taxonomy.HOLD_FLOOR_TAIL_S
        assert speech_in(out, lo, hi) > hi - lo - taxonomy.HOLD_FLOOR_MAX_GAP_S
    elif inst.action in ("stop", "recover"):
        first = spans(out)[0]
        assert first[0] < rec.cue.start < first[1] <= rec.cue.start + 0.5  # yielded quickly
        later = [a for a, _ in spans(out)[1:]]
        if inst.action == "stop":
            assert later == []
        else:
            lo, hi = taxonomy.RECOVER_WINDOW
            assert len(later) == 1 and rec.cue.end + lo <= later[0] <= rec.cue.end + hi


@pytest.mark.skipif(not INSTANCES, reason="the bundled fixtures (fixtures/) are not generated")
@pytest.mark.parametrize("inst", INSTANCES, ids=lambda i: i.id)
def test_oracle_on_bundled_instance(inst):
    rec = run(run_instance(inst, resolve_model("oracle")))
    if rec.cue is not None:
        assert rec.cue.forced is False
    expect_speech(inst, rec)
    result = scoring.score(inst, timeline_of(rec)).immediate
    expected = Verdict.NOT_JUDGED if inst.action == "backchannel" else Verdict.SUCCESS
    assert result.verdict is expected, result.reason
