"""SteppedDuplex: exact frames at any model rate, output on the input clock, native words
placed on the timeline and never ahead of it, model failures as ModelError."""

import math

import numpy as np
import pytest

from pytest_duplexact.data.timeline import Word
from pytest_duplexact.models.contract import ModelError, SessionInfo, StepOutput
from pytest_duplexact.pipelines.stepped import SteppedDuplex
from tests.pipelines.helpers import SR, ScriptedModel, direct_instance, run, spans, tone


@pytest.fixture(scope="module")
def info(tmp_path_factory):
    return SessionInfo(direct_instance(tmp_path_factory.mktemp("st"), "take_turn", "immediate"))


class Echo:
    """Returns its input frame: output must come back aligned with the input."""

    name = "echo"

    def __init__(self, sample_rate, frame_size):
        self.sample_rate, self.frame_size = sample_rate, frame_size
        self.sizes = []

    def start(self, info):
        pass

    def step(self, frame):
        self.sizes.append(len(frame))
        return frame.copy()

    def finish(self):
        pass


async def _push_all(duplex, samples, sizes):
    i = k = 0
    while i < len(samples):
        n = sizes[k % len(sizes)]
        await duplex.push(samples[i: i + n])
        i, k = i + n, k + 1
    return await duplex.close()


@pytest.mark.parametrize("rate,frame", [(24_000, 480), (24_000, 1920), (16_000, 320),
                                        (22_050, 441), (8_000, 160)])
def test_frames_are_exact_and_output_is_aligned(info, rate, frame):
    x = np.concatenate([np.zeros(SR // 2, np.float32), tone(1.7, 300.0),
                        np.zeros(SR // 3, np.float32)])
    model = Echo(rate, frame)
    # odd push sizes: 7 ms, 33 ms, 1 sample, 100 ms
    rec = run(_push_all(SteppedDuplex(model, info), x, [112, 528, 1, 1600]))
    assert set(model.sizes) == {frame}
    assert len(model.sizes) == math.ceil(len(x) * rate / SR / frame)
    assert len(rec.output) == len(rec.input) == len(x)
    np.testing.assert_array_equal(rec.input, x)
    # same instant in, same instant out: no lag, no stretch
    inner = slice(SR // 2 + 800, SR // 2 + int(1.7 * SR) - 800)
    assert np.max(np.abs(rec.output[inner] - x[inner])) < 0.02
    assert spans(rec.output)[0][0] == pytest.approx(0.5, abs=0.021)


def test_transcript_words_are_placed_and_never_ahead(info):
    words = [Word(0.805, 1.0, "hello"), Word(1.3, 1.5, "there")]
    model = ScriptedModel([(0.8, 1.6)], words, sample_rate=24_000, frame_size=1920)

    async def go():
        d = SteppedDuplex(model, info)
        await d.push(np.zeros(int(1.0 * SR), np.float32))
        early = [w.text for w in d.transcript()]
        await d.push(np.zeros(int(1.0 * SR), np.float32))
        late = d.transcript()
        return early, late, await d.close()

    early, late, rec = run(go())
    assert early == ["hello"]
    assert [w.text for w in late] == ["hello", "there"]
    assert [(round(w.start, 6), w.text) for w in rec.transcript] == [(0.805, "hello"),
                                                                     (1.3, "there")]
    assert rec.transcript[0].end == pytest.approx(1.0)


def test_heard_grows_with_pushes_and_stays_behind_now(info):
    model = ScriptedModel([(0.0, 5.0)], sample_rate=24_000, frame_size=1920)

    async def go():
        d = SteppedDuplex(model, info)
        sizes = []
        for _ in range(10):
            await d.push(np.zeros(640, np.float32))
            sizes.append((len(d.heard()), round(d.now * SR)))
        await d.close()
        return sizes

    sizes = run(go())
    assert all(h <= n for h, n in sizes)
    assert sizes[-1][0] > sizes[0][0]
    assert sizes[-1][1] - sizes[-1][0] <= 1920 * 2 // 3 + 400  # at most a frame + filter


class Broken(ScriptedModel):
    def step(self, frame):
        if self.k >= 25:
            raise RuntimeError("CUDA out of memory")
        return super().step(frame)


def test_model_exception_becomes_model_error_with_instance_and_time(info):
    model = Broken()

    async def go():
        d = SteppedDuplex(model, info)
        await d.push(np.zeros(SR, np.float32))

    with pytest.raises(ModelError) as e:
        run(go())
    msg = str(e.value)
    assert info.instance.id in msg and "0.50 s" in msg and "CUDA out of memory" in msg
    assert isinstance(e.value.__cause__, RuntimeError)


class WrongSize(ScriptedModel):
    def step(self, frame):
        return StepOutput(np.zeros(self.frame_size + 1, np.float32))


def test_wrong_frame_size_is_a_model_error(info):
    async def go():
        d = SteppedDuplex(WrongSize(), info)
        await d.push(np.zeros(SR, np.float32))

    with pytest.raises(ModelError, match=r"expected \(320,\) at 16000 Hz"):
        run(go())


class Emits:
    """Returns ``value`` in one sample of frame 10, silence elsewhere."""

    name, sample_rate, frame_size = "emits", SR, 320

    def __init__(self, value: float):
        self.value = value

    def start(self, info) -> None:
        self.k = 0

    def step(self, frame):
        out = np.zeros(self.frame_size, np.float32)
        if self.k == 10:
            out[7] = self.value
        self.k += 1
        return out

    def finish(self) -> None:
        pass


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_output_is_a_model_error_at_its_frame(info, value):
    async def go():
        d = SteppedDuplex(Emits(value), info)
        await d.push(np.zeros(SR, np.float32))

    with pytest.raises(ModelError, match=r"non-finite samples \(NaN or inf\) at 0\.20 s"):
        run(go())


@pytest.mark.parametrize("value", [3e38, 1e19, -2.5])
def test_output_far_above_full_scale_is_a_model_error(info, value):
    """1e19 is finite but its square overflows float32: once scored as silence (a miss)."""
    async def go():
        d = SteppedDuplex(Emits(value), info)
        await d.push(np.zeros(SR, np.float32))

    with pytest.raises(ModelError, match=r"far above full scale .* at 0\.20 s"):
        run(go())


def test_loud_but_plausible_output_is_kept(info):
    async def go():
        d = SteppedDuplex(Emits(1.9), info)
        await d.push(np.zeros(SR, np.float32))
        return await d.close()

    assert run(go()).output.max() > 1.0  # clipped only when written (docs/models.md)


@pytest.mark.parametrize("shape", ["float64", "column", "row"])
def test_lossless_output_variants_are_accepted_as_documented(info, shape):
    """float64 samples and (frame_size, 1) / (1, frame_size) frames lose nothing: accepted,
    converted to the same float32 output (docs/models.md, "Deadlines and broken output")."""
    class Variant(Emits):
        def step(self, frame):
            out = super().step(frame).astype(np.float64)
            return {"float64": out, "column": out[:, None], "row": out[None, :]}[shape]

    async def go(model):
        d = SteppedDuplex(model, info)
        await d.push(np.zeros(SR, np.float32))
        return await d.close()

    got, want = run(go(Variant(0.5))).output, run(go(Emits(0.5))).output
    assert got.dtype == np.float32 and np.array_equal(got, want)


class EmitsInt16(Emits):
    def step(self, frame):
        return (super().step(frame) * 0).astype(np.int16)


def test_int16_output_is_a_model_error_saying_how_to_convert(info):
    async def go():
        d = SteppedDuplex(EmitsInt16(0.0), info)
        await d.push(np.zeros(SR, np.float32))

    with pytest.raises(ModelError, match=r"int16 samples; return float32 .* x / 32768"):
        run(go())


def test_bad_declared_rate_is_a_model_error(info):
    with pytest.raises(ModelError, match="sample_rate must be a positive int"):
        SteppedDuplex(ScriptedModel(sample_rate=0), info)


def test_start_and_finish_called_once(info):
    model = ScriptedModel()

    async def go():
        d = SteppedDuplex(model, info)
        await d.push(np.zeros(100, np.float32))
        return await d.close()

    rec = run(go())
    assert (model.started, model.finished) == (1, 1)
    assert len(rec.output) == 100  # a partial frame is padded, stepped and trimmed back
