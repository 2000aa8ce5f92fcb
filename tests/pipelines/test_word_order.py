"""Words from a stepped model keep the order it spoke them in (issue 31, item 5): a word still
open at the end of a step is closed a frame later, its start computed from other float
arithmetic than the words closed in their own frame; on the raw sum it could land a bit before
them and sort first ("answer sure thing here is my")."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_duplexact.listen.segmentation import Span, assign_words
from pytest_duplexact.models.contract import SessionInfo, StepOutput
from pytest_duplexact.models.util.words import TextStream
from pytest_duplexact.pipelines.stepped import SteppedDuplex
from tests.pipelines.helpers import SR, direct_instance, run

_WORDS = st.text("abcdefghij", min_size=1, max_size=6)


class Talker:
    """A stepped model that sends frame k's TEXT delta through ``TextStream``, as a bridge
    (models/bridge.py) and Moshi do."""

    name = "talker"

    def __init__(self, rate: int, frame: int, deltas: dict[int, str]):
        self.sample_rate, self.frame_size, self.deltas = rate, frame, deltas

    def start(self, info):
        self.k, self.text = 0, TextStream(self.frame_size / self.sample_rate)

    def step(self, frame):
        words = self.text.feed_text(self.k, self.deltas.get(self.k))
        self.k += 1
        return StepOutput(np.zeros(self.frame_size, np.float32), words)

    def finish(self):
        pass


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rate=st.sampled_from([8_000, 16_000, 22_050, 24_000, 44_100, 48_000]),
       frame_ms=st.sampled_from([10, 20, 40, 80]),
       deltas=st.dictionaries(st.integers(0, 250), st.lists(_WORDS, min_size=1, max_size=6),
                              min_size=1, max_size=4))
def test_a_step_s_words_keep_their_order(tmp_path_factory, rate, frame_ms, deltas):
    frame = rate * frame_ms // 1000
    # one delta a frame, each starting a new word: " w1 w2 ... wn" (the last one stays open
    # until the next frame's text or silence closes it)
    model = Talker(rate, frame, {k: "".join(" " + w for w in ws) for k, ws in deltas.items()})
    info = SessionInfo(direct_instance(tmp_path_factory.mktemp("w"), "take_turn", "immediate"))
    seconds = (max(deltas) + 3) * frame / rate
    duplex = SteppedDuplex(model, info)

    async def trial():
        await duplex.push(np.zeros(int(seconds * SR) + 1, np.float32))
        return await duplex.close()

    rec = run(trial())
    spoken = [w for k in sorted(deltas) for w in deltas[k]]
    assert [w.text for w in rec.transcript] == spoken
    # and as a segment's text, which is what failure reasons, flips and the lanes show
    whole = assign_words([Span(0.0, seconds)], rec.transcript)
    assert whole.texts() == [" ".join(spoken)]
