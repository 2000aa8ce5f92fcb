"""Drive a frame-stepped model (models.base.SteppedModel) as a ``Duplex`` session.

Input arrives at 16 kHz in any chunk sizes. It is resampled to the model's rate with a
streaming resampler (one continuous signal, no seams at chunk edges), and the model is
stepped with exactly ``frame_size`` samples whenever a whole frame is available; the rest
waits for the next push. Output frame k is the model's audio for the same instant as input
frame k, so the output track (resampled back to 16 kHz the same way) lies on the input clock.
The model runs as fast as it computes: no wall clock is involved.
"""

from __future__ import annotations

import numpy as np
import soxr

from ..data.audio import SAMPLE_RATE
from ..data.timeline import Word
from ..models.adapter import traits
from ..models.contract import ModelError, SessionInfo, StepOutput, SteppedModel
from . import watchdog
from .duplex import Duplex, Recording, Track
from .output_check import dtype_problem, level_problem

_F32 = np.dtype(np.float32)
_EMPTY = np.zeros(0, dtype=np.float32)
_EMPTY.flags.writeable = False


class StreamResampler:
    """soxr's streaming resampler: feeding a signal in pieces gives exactly what resampling
    it whole would (delay-compensated); ``flush`` returns the tail held back by the filter."""

    def __init__(self, from_rate: int, to_rate: int):
        self._identity = from_rate == to_rate
        self._stream = None if self._identity else soxr.ResampleStream(
            from_rate, to_rate, 1, dtype="float32", quality="HQ")

    def push(self, samples: np.ndarray) -> np.ndarray:
        samples = np.asarray(samples, dtype=np.float32)
        return samples if self._identity else self._stream.resample_chunk(samples)

    def flush(self) -> np.ndarray:
        if self._identity:
            return np.zeros(0, dtype=np.float32)
        return self._stream.resample_chunk(np.zeros(0, dtype=np.float32), last=True)


def model_name(model) -> str:
    return traits(model).name


class SteppedDuplex(Duplex):
    """One session of a stepped model on one instance. Creating it calls ``model.start``.

    A model may also offer ``step_many(frames)``: ``frames`` is an (n, frame_size) array of
    consecutive input frames, the answer their n output frames ((n, frame_size) or flat),
    exactly what n ``step`` calls would return, audio only (no transcript). It is then called
    once per push instead of once per frame (the silent model: docs/benchmarks.md)."""

    free_running = True

    def __init__(self, model: SteppedModel, info: SessionInfo):
        self.model = model
        self.info = info
        self.events: list[tuple[float, str]] = []
        declared = traits(model)
        self._name = declared.name
        rate, frame = declared.sample_rate, declared.frame_size
        for attr, v in (("sample_rate", rate), ("frame_size", frame)):
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ModelError(f"model {self._name}: {attr} must be a positive int, got {v!r}")
        self.model_rate, self.frame_size = rate, frame
        self._same_rate = rate == SAMPLE_RATE
        self._to_model = StreamResampler(SAMPLE_RATE, rate)
        self._from_model = StreamResampler(rate, SAMPLE_RATE)
        self._carry = np.zeros(0, dtype=np.float32)  # model-rate input short of a frame
        self._input = Track()
        self._output = Track()
        self._words: list[Word] = []
        self._steps = 0
        self._closed = False
        self._watch = watchdog.current()  # each answer from the model is a sign of progress
        self._step_many = declared.step_many
        self._guard("start", lambda: self._start_model(info))
        self._answered()

    # --- clock -------------------------------------------------------------------------------
    @property
    def now(self) -> float:
        return self._input.size / SAMPLE_RATE

    def _frame_time(self, k: int) -> float:
        return k * self.frame_size / self.model_rate

    def _guard(self, what: str, call, t: float | None = None):
        try:
            return call()
        except ModelError:
            raise
        except Exception as e:
            at = "" if t is None else f" at {t:.2f} s"
            raise ModelError(f"model {self._name} failed in {what} on instance "
                             f"{self.info.instance.id}{at}: {type(e).__name__}: {e}") from e

    # --- stepping ----------------------------------------------------------------------------
    def _step(self, frame: np.ndarray) -> None:
        # The hot loop of a stepped run (one call per model frame): the guard is inlined and
        # the checks are the cheapest numpy offers, measured in benchmarks/harness_performance.py.
        try:
            out = self.model.step(frame)
        except ModelError:
            raise
        except Exception as e:
            raise self._failed("step", e) from e
        self._accept(out)

    def _failed(self, what: str, e: Exception) -> ModelError:
        """A model call that raised, as this instance's ModelError."""
        return ModelError(f"model {self._name} failed in {what} on instance "
                          f"{self.info.instance.id} at {self._frame_time(self._steps):.2f} s: "
                          f"{type(e).__name__}: {e}")

    def _accept(self, out) -> None:
        """The model's answer to the next frame (``step``'s, or one slot's of
        ``step_batch``): checked, then added to the output track."""
        self._answered()
        k = self._steps
        t0 = k * self.frame_size / self.model_rate
        audio, words = (out.audio, out.transcript) if isinstance(out, StepOutput) else (out, ())
        raw = np.asarray(audio)
        if raw.dtype is not _F32 and (problem := dtype_problem(raw)) is not None:
            raise ModelError(f"model {self._name} returned {problem}, at {t0:.2f} s on "
                             f"instance {self.info.instance.id}")
        audio = raw.astype(np.float32, copy=False)
        if audio.shape != (self.frame_size,):
            if audio.ndim == 2 and 1 in audio.shape:
                audio = audio.reshape(-1)
            if audio.shape != (self.frame_size,):
                raise ModelError(f"model {self._name} returned {audio.shape} samples for frame "
                                 f"{k} of instance {self.info.instance.id} at {t0:.2f} s; "
                                 f"expected ({self.frame_size},) at {self.model_rate} Hz")
        if (problem := level_problem(audio)) is not None:
            raise ModelError(f"model {self._name} returned {problem} at {t0:.2f} s on "
                             f"instance {self.info.instance.id}")
        if words:
            # On the model's sample grid: a word closed a frame after it began (models/words.py)
            # gets its start from other float arithmetic than one closed in its own frame, a
            # last-bit difference that would sort it before the words it follows.
            rate = self.model_rate
            for w in words:
                self._words.append(Word(round((t0 + w.start) * rate) / rate,
                                        round((t0 + w.end) * rate) / rate, w.text))
        self._steps = k + 1
        self._output.append(audio if self._same_rate else self._from_model.push(audio))

    def _step_block(self, frames: np.ndarray) -> None:
        """``n`` frames through ``model.step_many`` at once, checked like ``_step``."""
        k, n = self._steps, len(frames)
        t0 = k * self.frame_size / self.model_rate
        try:
            out = self._step_many(frames)
        except ModelError:
            raise
        except Exception as e:
            raise ModelError(f"model {self._name} failed in step_many on instance "
                             f"{self.info.instance.id} at {t0:.2f} s: {type(e).__name__}: "
                             f"{e}") from e
        self._answered()
        raw = np.asarray(out)
        if raw.dtype is not _F32 and (problem := dtype_problem(raw)) is not None:
            raise ModelError(f"model {self._name} returned {problem}, from step_many at "
                             f"{t0:.2f} s on instance {self.info.instance.id}")
        audio = raw.astype(np.float32, copy=False)
        if audio.shape not in ((n, self.frame_size), (n * self.frame_size,)):
            raise ModelError(f"model {self._name} returned {audio.shape} samples from step_many "
                             f"for {n} frames from frame {k} of instance "
                             f"{self.info.instance.id} at {t0:.2f} s; expected "
                             f"({n}, {self.frame_size}) at {self.model_rate} Hz")
        audio = audio.reshape(-1)
        if (problem := level_problem(audio)) is not None:
            raise ModelError(f"model {self._name} returned {problem} from step_many at "
                             f"{t0:.2f} s on instance {self.info.instance.id}")
        self._steps = k + n
        self._output.append(audio if self._same_rate else self._from_model.push(audio))

    async def _feed(self, model_rate_samples: np.ndarray) -> None:
        data = np.concatenate([self._carry, model_rate_samples]) if self._carry.size \
            else model_rate_samples
        f = self.frame_size
        n = len(data) // f
        self._carry = data[n * f:].copy() if n * f < len(data) else _EMPTY
        if n:
            await self._step_frames(data[: n * f].reshape(n, f))

    async def _step_frames(self, frames: np.ndarray) -> None:
        """Step whole frames (an (n, frame_size) array); the batched session
        (pipelines/lockstep.py) hands them to the shared model call instead."""
        with np.errstate(over="ignore"):  # a huge frame's sum of squares: see level_problem
            if self._step_many is not None:
                self._step_block(frames)
            else:
                for frame in frames:
                    self._step(frame)

    async def push(self, samples: np.ndarray) -> None:
        if self._closed:
            raise RuntimeError("push() after close()")
        samples = np.asarray(samples, dtype=np.float32).reshape(-1)
        self._input.append(samples)
        await self._feed(self._to_model.push(samples))

    # --- what a listener has heard -----------------------------------------------------------
    def heard(self) -> np.ndarray:
        return self._output.view()

    def transcript(self) -> list[Word]:
        now = self.now
        return [w for w in self._words if w.start <= now]

    def abort(self) -> None:
        """End the model's session after a failure elsewhere; no Recording."""
        if not self._closed:
            self._closed = True
            self._finish_quietly()

    def _answered(self) -> None:
        """The model returned control: a beat for the watchdog, unless the watcher has given
        up on this trial (deadline, Ctrl-C); then unwind without calling the model again."""
        self._unless_abandoned()
        self._watch.beats += 1

    def _unless_abandoned(self) -> None:
        if self._watch.abandoned:
            raise watchdog.TrialAbandoned(f"instance {self.info.instance.id}: abandoned by "
                                          "the watchdog")

    def _start_model(self, info: SessionInfo) -> None:
        self.model.start(info)

    def _finish_model(self) -> None:
        self.model.finish()

    def _finish_quietly(self) -> None:
        if self._watch.abandoned:  # the next instance may be using the model already
            return
        try:
            self._finish_model()
        except Exception:  # the error being raised already says what went wrong
            pass

    async def close(self) -> Recording:
        """Step the held-back input (the last frame padded with silence), end the model's
        session and return the trial; the output is trimmed to the input's length."""
        if self._closed:
            raise RuntimeError("close() called twice")
        self._closed = True
        try:
            await self._feed(self._to_model.flush())
            if self._carry.size:
                await self._feed(np.zeros(self.frame_size - self._carry.size,
                                          dtype=np.float32))
            self._output.append(self._from_model.flush())
        except BaseException:
            self._finish_quietly()
            raise
        self._unless_abandoned()
        self._guard("finish", self._finish_model, self.now)
        n = self._input.size
        out = self._output.view()[:n]
        if len(out) < n:
            out = np.concatenate([out, np.zeros(n - len(out), dtype=np.float32)])
        words = tuple(sorted((w for w in self._words if w.start < n / SAMPLE_RATE),
                             key=lambda w: w.start))
        return Recording(input=self._input.view().copy(), output=out.copy(),
                         sample_rate=SAMPLE_RATE, transcript=words, events=list(self.events))
