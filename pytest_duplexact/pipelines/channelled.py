"""A session heard through a channel (channel.py): ``ChannelledDuplex`` wraps any ``Duplex``
and passes every push (user audio, simulator cues, barge-in branches, silences) through the
trial's channel before the model gets it. The pipelines see the session unchanged.

The echo stage mixes in what the model played ``delay`` earlier, read from the session's own
``heard()`` track (the recording's clock). A push is split so that every echoed sample was
heard already:

* a stepped session's output is known up to its last stepped frame, so the echo lands at the
  requested delay to the sample, provided the delay is at least one model frame (the
  preflight refuses a shorter one: ``echo_problem``);
* a streaming session's output is known up to the wall clock; what is due but not heard yet
  (the playback resampler's few ms) echoes as silence, and the most of it in a trial is
  recorded as an event: the measured playback error.

The Recording keeps the clean user track as ``input`` and what the model heard as
``channel_input``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..data.audio import SAMPLE_RATE
from ..models.adapter import traits
from ..models.contract import ModelError
from .channel import Channel, speech_level, trial_seed
from .direct import read_clip
from .duplex import Duplex, Recording, Track


class ChannelledDuplex(Duplex):
    def __init__(self, inner: Duplex, channel: Channel, info):
        self.inner = inner
        self.channel = channel
        self.free_running = getattr(inner, "free_running", False)
        # never whole pushes: the echo mixes in what the model said while the input played
        self.streams_pushes = False
        self._clean = Track()
        self._delay = channel.echo_delay_samples()
        self._unheard = 0  # streaming: most echo samples due before they were heard
        self._where = info.instance.id
        self.chain = channel.open(trial_seed(info.seed, info.instance.id),
                                  speech_level(info.instance),
                                  self._played if self._delay is not None else None)

    def __getattr__(self, name):  # usage, abort, stop_playback, lateness, ...
        return getattr(self.inner, name)

    @property
    def events(self):
        return self.inner.events

    @property
    def now(self) -> float:
        return self.inner.now

    def heard(self) -> np.ndarray:
        return self.inner.heard()

    def transcript(self):
        return self.inner.transcript()

    def event(self, what: str) -> None:
        self.inner.event(what)

    async def read_clip(self, clip) -> np.ndarray:
        return await read_clip(self.inner, clip)  # the inner duplex's way, if it has one

    def _played(self, a: int, b: int) -> np.ndarray:
        heard = self.inner.heard()
        out = np.zeros(b - a, dtype=np.float32)
        lo, hi = max(a, 0), min(b, len(heard))
        if hi > lo:
            out[lo - a: hi - a] = heard[lo:hi]
        if b > max(len(heard), a, 0):
            self._unheard = max(self._unheard, b - max(len(heard), a, 0))
        return out

    async def push(self, samples: np.ndarray) -> None:
        x = np.asarray(samples, dtype=np.float32).reshape(-1)
        self._clean.append(x)
        if self._delay is None:
            await self.inner.push(self.chain.process(x))
            return
        i = 0
        while i < len(x):
            # the echo of the next sample must have been heard: at most known + delay
            room = len(self.inner.heard()) + self._delay - self.chain.pos
            if room <= 0:
                if self.free_running:
                    raise ModelError(
                        f"instance {self._where}: the echo's delay ({self._delay} samples) is "
                        "shorter than the model's output lags its input; use a longer "
                        "echo delay (docs/channels.md)")
                room = len(x) - i  # streaming: not heard yet, echoed as silence
            n = min(room, len(x) - i)
            await self.inner.push(self.chain.process(x[i: i + n]))
            i += n

    async def close(self) -> Recording:
        rec = await self.inner.close()
        if self._unheard and not self.free_running:
            rec.events.append((round(self.inner.now, 4), "echo: up to "
                               f"{self._unheard * 1000 / SAMPLE_RATE:.1f} ms of the model's "
                               "output was due before it was heard (echoed as silence)"))
        clean = self._clean.view().copy()
        return replace(rec, input=clean, channel_input=rec.input)


def echo_problem(channel: Channel, model) -> str | None:
    """Why ``channel``'s echo cannot run on a stepped ``model`` (None when it can): the model
    answers a whole frame at a time, so its output comes back no sooner than a frame later."""
    delay = channel.echo_delay_samples()
    declared = traits(model)
    rate, frame = declared.sample_rate, declared.frame_size
    if delay is None or not isinstance(rate, int) or not isinstance(frame, int) or rate <= 0:
        return None
    lag = frame * SAMPLE_RATE / rate + (0 if rate == SAMPLE_RATE else 0.01 * SAMPLE_RATE)
    if delay >= lag:
        return None
    need = int(np.ceil(lag * 1000 / SAMPLE_RATE))
    return (f"--duplexact-channel={channel.spec}: the model answers in "
            f"{frame * 1000 / rate:g} ms frames, so its own output can come back no sooner "
            f"than {need} ms; give the echo a delay of at least {need} ms")
