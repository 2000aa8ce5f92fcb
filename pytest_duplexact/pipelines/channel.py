"""Channels (``--duplexact-channel=SPEC``, docs/channels.md): what lies between the user and
the model. The user's side passes through the channel before the model hears it; the
annotations, the cues and the scoring of the model's output are unchanged.

A spec is ``clean`` or stages joined by ``+``, applied left to right:

* ``noise:KIND@SNR``: additive noise (``white``, ``pink``, ``babble``, ``cafe``) at SNR dB
  against the user's *active* speech level (``active_level``), not the whole clip's;
* ``phone``: a narrow-band line: 300-3400 Hz, 8 kHz sampling, G.711 mu-law;
* ``room:RT60``: a synthetic room impulse response whose reverberation decays 60 dB in RT60 s;
* ``echo:LEVEL_DB@DELAY_MS``: the model's own played output mixed back at LEVEL_DB (relative
  to what it played) DELAY_MS later: a speakerphone without echo cancellation.

Every stage is a causal, stateful processor: ``process(x, start)`` maps the next ``len(x)``
samples to as many, and feeding a signal in pieces gives exactly what feeding it whole does.
Everything random is drawn from the trial's seed, so a channel is a pure function of (spec,
seed, the user's audio, the model's played output). ``apply`` runs a chain over a whole
signal; ``channelled.py`` runs it inside a live session.

Our own DSP rather than a library: every stage here is a few numpy lines, causal and
streaming (audiomentations' and pyroomacoustics' are whole-clip, and pull scipy and compiled
extensions into the core); degrade.py's mu-law curve and fixture talkers are shared.
"""

from __future__ import annotations

import functools
import re
import zlib
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..data.audio import SAMPLE_RATE
from ..data.suggest import did_you_mean

CLEAN = "clean"
NOISE_KINDS = ("white", "pink", "babble", "cafe")
STAGES = ("noise", "phone", "room", "echo")
SNR_RANGE_DB = (-20.0, 60.0)
RT60_RANGE_S = (0.05, 3.0)
ECHO_LEVEL_RANGE_DB = (-60.0, 12.0)
ECHO_DELAY_RANGE_MS = (0.0, 2000.0)
PHONE_BAND_HZ = (300.0, 3400.0)
PHONE_RATE = 8000
# 511 taps put the 300 Hz edge's transition within ~170 Hz; linear phase, so the line delays
# the user by (511 - 1) / 2 + (127 - 1) / 2 samples = 18 ms, as every real line delays more
PHONE_BAND_TAPS = 511
PHONE_INTERP_TAPS = 127
NOISE_LOOP = 1 << 18  # 16.4 s of noise per kind and seed, looped seamlessly
LOOPS = 4  # distinct loops per kind a run's trials draw from
LEVEL_WINDOW_S = 0.05  # the noise's short-term level is held constant over this window
ACTIVE_FRAME_S = 0.02
ACTIVE_RANGE_DB = 35.0  # frames within this of the loudest count as active speech
USER_ROLES = ("user", "lead_in", "cue", "branch_acknowledged", "branch_ignored")


class ChannelError(ValueError):
    """A spec that cannot be read; the message is the one line the user sees."""


# --- the spec ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Stage:
    kind: str  # one of STAGES
    name: str = ""  # noise: its KIND
    a: float = 0.0  # noise: SNR dB; room: RT60 s; echo: level dB
    b: float = 0.0  # echo: delay ms

    @property
    def spec(self) -> str:
        if self.kind == "noise":
            return f"noise:{self.name}@{_num(self.a)}"
        if self.kind == "room":
            return f"room:{_num(self.a)}"
        if self.kind == "echo":
            return f"echo:{_num(self.a)}@{_num(self.b)}"
        return self.kind


@dataclass(frozen=True)
class Channel:
    stages: tuple[Stage, ...] = ()

    @property
    def spec(self) -> str:
        """The canonical spec (numbers in their shortest form): the fingerprint's value."""
        return "+".join(s.spec for s in self.stages) or CLEAN

    @property
    def clean(self) -> bool:
        return not self.stages

    def echo_delay_samples(self) -> int | None:
        """The shortest echo delay in samples (None without an echo stage)."""
        delays = [_samples(s.b) for s in self.stages if s.kind == "echo"]
        return min(delays) if delays else None

    def open(self, seed: int, speech_level: float,
             played: Callable[[int, int], np.ndarray] | None = None) -> "Chain":
        return Chain([_open(s, seed, k, speech_level, played)
                      for k, s in enumerate(self.stages)])


def _num(v: float) -> str:
    return f"{v:g}"


def _samples(ms: float) -> int:
    return int(round(ms * SAMPLE_RATE / 1000))


_USAGE = ("use clean, or stages joined by '+': noise:KIND@SNR (KIND: white, pink, babble, "
          "cafe), phone, room:RT60, echo:LEVEL_DB@DELAY_MS, e.g. phone+noise:babble@10")


def parse(spec: str) -> Channel:
    """The Channel of ``spec``; ChannelError (one line, with a did-you-mean) otherwise."""
    text = str(spec or "").strip()
    if text.lower() in ("", CLEAN):
        return Channel()
    parts = [part.strip() for part in text.split("+")]
    if "" in parts:
        raise ChannelError(f"channel {text!r}: an empty stage between '+'; {_USAGE}")
    heads = [part.partition(":")[0].strip().lower() for part in parts]
    if CLEAN in heads:  # no stage: "did you mean 'clean'?" said nothing of use
        rest = "+".join(p for p, h in zip(parts, heads) if h != CLEAN)
        raise ChannelError(f"channel {text!r}: '{CLEAN}' stands alone (it is no stage): "
                           + (f"leave it out, e.g. {rest!r}" if rest else
                              f"write {CLEAN} alone, or leave the option out"))
    return Channel(tuple(_stage(part, text) for part in parts))


def _number(value: str, what: str, part: str, spec: str, lo: float, hi: float) -> float:
    try:
        v = float(value)
    except ValueError:
        v = float("nan")
    if not (lo <= v <= hi):
        raise ChannelError(f"channel {spec!r}: {part!r}: {what} must be a number from "
                           f"{_num(lo)} to {_num(hi)}, got {value!r}")
    return v


def _stage(part: str, spec: str) -> Stage:
    head, _, rest = part.partition(":")
    head = head.strip().lower()
    if head not in STAGES:
        raise ChannelError(f"channel {spec!r}: unknown stage {head!r}"
                           f"{did_you_mean(head, STAGES + (() if '+' in spec else (CLEAN,)))}; "
                           f"{_USAGE}")
    if head == "phone":
        if rest:
            raise ChannelError(f"channel {spec!r}: 'phone' takes no parameter; {_USAGE}")
        return Stage("phone")
    if head == "room":
        return Stage("room", a=_number(rest, "RT60 (seconds)", part, spec, *RT60_RANGE_S))
    m = re.fullmatch(r"([^@]*)@(.*)", rest)
    if head == "noise":
        if not m:
            raise ChannelError(f"channel {spec!r}: {part!r}: write noise:KIND@SNR, e.g. "
                               "noise:pink@10")
        kind = m.group(1).strip().lower()
        if kind not in NOISE_KINDS:
            raise ChannelError(f"channel {spec!r}: unknown noise {kind!r}"
                               f"{did_you_mean(kind, NOISE_KINDS)}; use one of "
                               f"{', '.join(NOISE_KINDS)}")
        return Stage("noise", kind, _number(m.group(2), "SNR (dB)", part, spec, *SNR_RANGE_DB))
    if not m:
        raise ChannelError(f"channel {spec!r}: {part!r}: write echo:LEVEL_DB@DELAY_MS, e.g. "
                           "echo:-6@50")
    return Stage("echo", a=_number(m.group(1), "the level (dB)", part, spec,
                                   *ECHO_LEVEL_RANGE_DB),
                 b=_number(m.group(2), "the delay (ms)", part, spec, *ECHO_DELAY_RANGE_MS))


def trial_seed(seed: int, instance_id: str) -> int:
    """One trial's channel seed: the run's seed and the instance, so every trial of a run
    hears other noise, and the same run hears the same."""
    return zlib.crc32(f"{seed}:{instance_id}".encode("utf-8"))


# --- levels -----------------------------------------------------------------------------------

def active_level(x: np.ndarray, rate: int = SAMPLE_RATE) -> float:
    """RMS of the active speech of ``x``: over the 20 ms frames within ACTIVE_RANGE_DB of the
    loudest (a simplified ITU-T P.56), so pauses and silence do not lower it. 0 for silence."""
    x = np.asarray(x, dtype=np.float64)
    n = int(rate * ACTIVE_FRAME_S)
    k = len(x) // n
    if k == 0:
        return float(np.sqrt(np.mean(x * x))) if len(x) else 0.0
    power = np.mean(x[: k * n].reshape(k, n) ** 2, axis=1)
    top = float(power.max())
    if top <= 1e-12:
        return 0.0
    active = power[power >= top * 10 ** (-ACTIVE_RANGE_DB / 10)]
    return float(np.sqrt(active.mean()))


def speech_level(instance) -> float:
    """The active level of everything the user says in ``instance`` (its user-side clips)."""
    parts = [instance.clips[r].load() for r in USER_ROLES if r in instance.clips]
    return active_level(np.concatenate(parts)) if parts else 0.0


# --- the processors ---------------------------------------------------------------------------

class Chain:
    """The stages of one trial, in order."""

    def __init__(self, stages: list):
        self.stages = stages
        self.pos = 0  # samples processed so far (the session clock)

    def process(self, x: np.ndarray) -> np.ndarray:
        y = np.asarray(x, dtype=np.float32)
        for stage in self.stages:
            y = stage.process(y, self.pos)
        self.pos += len(x)
        return np.clip(y, -1.0, 1.0).astype(np.float32, copy=False)


class _FIR:
    """Streaming FIR: exact across chunk edges (keeps the last ``len(h) - 1`` inputs)."""

    BLOCK = 1 << 13  # a long push (a whole clip) goes by FFT in blocks of this many

    def __init__(self, h: np.ndarray):
        self.h = np.asarray(h, dtype=np.float64)
        self.state = np.zeros(len(h) - 1)
        self._size = 1 << (self.BLOCK + 2 * len(h) - 3).bit_length()
        self._spectrum = np.fft.rfft(self.h, self._size)

    def process(self, x: np.ndarray) -> np.ndarray:
        if len(x) > self.BLOCK:
            return np.concatenate([self.process(x[i: i + self.BLOCK])
                                   for i in range(0, len(x), self.BLOCK)])
        buf = np.concatenate([self.state, x])
        self.state = buf[len(buf) - len(self.state):]
        m = len(self.h)
        if len(x) < 4 * m:  # short pushes: the direct sum is cheaper than an FFT
            return np.convolve(buf, self.h, mode="valid")
        full = np.fft.irfft(np.fft.rfft(buf, self._size) * self._spectrum, self._size)
        return full[m - 1: len(buf)]


class _FFTConvolver:
    """Streaming overlap-add convolution for long responses (a room's)."""

    def __init__(self, h: np.ndarray):
        self.h = np.asarray(h, dtype=np.float64)
        self.tail = np.zeros(len(h) - 1)
        self._spectra: dict[int, np.ndarray] = {}

    def process(self, x: np.ndarray) -> np.ndarray:
        n, m = len(x), len(self.h)
        if n == 0:
            return np.zeros(0)
        size = 1 << (n + m - 2).bit_length()
        spec = self._spectra.get(size)
        if spec is None:
            spec = self._spectra[size] = np.fft.rfft(self.h, size)
        full = np.fft.irfft(np.fft.rfft(x, size) * spec, size)[: n + m - 1]
        full[: m - 1] += self.tail
        self.tail = full[n:].copy()
        return full[:n]


def _windowed_sinc(cut_hz: float, taps: int, rate: int) -> np.ndarray:
    t = np.arange(taps) - (taps - 1) / 2
    return 2 * cut_hz / rate * np.sinc(2 * cut_hz / rate * t) * np.blackman(taps)


def band_pass(lo_hz: float, hi_hz: float, taps: int, rate: int = SAMPLE_RATE) -> np.ndarray:
    """A linear-phase band-pass FIR (the difference of two windowed-sinc low-passes)."""
    return _windowed_sinc(hi_hz, taps, rate) - _windowed_sinc(lo_hz, taps, rate)


class _Phone:
    """300-3400 Hz at 16 kHz, every other sample kept (8 kHz), mu-law, back to 16 kHz."""

    def __init__(self):
        from ..listen.degrade import mu_law

        self.mu_law = mu_law
        self.band = _FIR(band_pass(*PHONE_BAND_HZ, PHONE_BAND_TAPS))
        # interpolation: zero-stuffed 8 kHz samples through a 3.6 kHz low-pass, gain 2
        self.interp = _FIR(2 * _windowed_sinc(3600.0, PHONE_INTERP_TAPS, SAMPLE_RATE))

    def process(self, x: np.ndarray, start: int) -> np.ndarray:
        y = self.band.process(x)
        even = (np.arange(start, start + len(x)) % 2) == 0  # the 8 kHz instants, absolute
        z = np.zeros(len(x))
        z[even] = self.mu_law(y[even])
        return self.interp.process(z)


def room_response(rt60: float, seed: int, rate: int = SAMPLE_RATE) -> np.ndarray:
    """A synthetic room impulse response: the direct path, a few early reflections (2-20 ms)
    and an exponentially decaying Gaussian tail (-60 dB at ``rt60``); unit energy, so the
    room does not change the speech level."""
    rng = np.random.default_rng([seed, 0x500])
    n = int(min(rt60 * 1.2, 3.0) * rate) + 1
    t = np.arange(n) / rate
    h = rng.standard_normal(n) * np.exp(-6.908 * t / rt60)
    h[: int(0.005 * rate)] *= np.linspace(0.0, 1.0, int(0.005 * rate))  # the tail's onset
    h *= 0.5 / max(float(np.sqrt(np.sum(h * h))), 1e-12)
    h[0] = 1.0
    for _ in range(6):
        k = int(rng.integers(int(0.002 * rate), int(0.02 * rate)))
        h[k] += float(rng.uniform(0.2, 0.6)) * float(rng.choice((-1.0, 1.0)))
    return h / float(np.sqrt(np.sum(h * h)))


class _Room:
    def __init__(self, rt60: float, seed: int):
        self.conv = _FFTConvolver(room_response(rt60, seed))

    def process(self, x: np.ndarray, start: int) -> np.ndarray:
        return self.conv.process(x)


def _steady(x: np.ndarray, rate: int = SAMPLE_RATE) -> np.ndarray:
    """``x`` with its short-term level held constant (a gain riding a circular moving average
    of its power over LEVEL_WINDOW_S), so any stretch of a clip gets the noise level asked
    for, babble included; unit RMS; circular, so the loop has no seam."""
    w = int(LEVEL_WINDOW_S * rate)
    p = x.astype(np.float64) ** 2
    ext = np.concatenate([p[-w:], p, p[:w]])
    c = np.concatenate([[0.0], np.cumsum(ext)])
    env = (c[2 * w + 1:] - c[: -2 * w - 1])[: len(x)] / (2 * w + 1)
    y = x / np.sqrt(np.maximum(env, 1e-12 * max(float(env.max()), 1e-30)))
    return y / float(np.sqrt(np.mean(y * y)))


def _pink(n: int, rng) -> np.ndarray:
    """1/f noise by shaping white noise's spectrum (circular: loops without a seam); flat
    below 50 Hz so its level does not wander over seconds."""
    spec = np.fft.rfft(rng.standard_normal(n))
    f = np.fft.rfftfreq(n, 1 / SAMPLE_RATE)
    spec /= np.sqrt(np.maximum(f, 50.0))
    return np.fft.irfft(spec, n)


def _clinks(n: int, rng) -> np.ndarray:
    """Cups and cutlery: short decaying high tones at random instants."""
    out = np.zeros(n)
    ring = np.arange(int(0.15 * SAMPLE_RATE)) / SAMPLE_RATE
    for _ in range(int(n / SAMPLE_RATE * 1.5)):
        at = int(rng.integers(n))
        tone = np.sin(2 * np.pi * rng.uniform(2000, 6000) * ring) * np.exp(-ring / 0.03)
        k = min(len(tone), n - at)
        out[at: at + k] += tone[:k] * rng.uniform(0.5, 2.0)
    return out


@functools.lru_cache(maxsize=16)
def noise_loop(kind: str, seed: int, n: int = NOISE_LOOP) -> np.ndarray:
    """``n`` samples of ``kind`` noise at a steady unit RMS (float32), drawn from ``seed``.
    A trial draws one of LOOPS loops and its own starting point in it: making a loop costs
    tens of ms, a trial's draw nothing."""
    rng = np.random.default_rng([seed, NOISE_KINDS.index(kind)])
    if kind == "white":
        x = rng.standard_normal(n)
    elif kind == "pink":
        x = _pink(n, rng)
    else:
        from ..listen.degrade import babble

        x = _steady(babble(n, int(rng.integers(2**31))).astype(np.float64))
        if kind == "cafe":  # a room of talkers, its hum and its crockery
            x = x + 0.5 * _steady(_pink(n, rng)) + 0.15 * _clinks(n, rng)
    out = _steady(x).astype(np.float32)
    out.flags.writeable = False  # shared by every trial that draws it
    return out


class _Noise:
    def __init__(self, kind: str, snr_db: float, seed: int, speech_level: float):
        self.loop = noise_loop(kind, seed % LOOPS)
        self.offset = int(np.random.default_rng([seed, 0x0FF]).integers(len(self.loop)))
        self.gain = speech_level * 10 ** (-snr_db / 20)

    def process(self, x: np.ndarray, start: int) -> np.ndarray:
        if self.gain == 0.0:
            return x
        idx = (np.arange(start, start + len(x)) + self.offset) % len(self.loop)
        return x + self.gain * self.loop[idx]


class _Echo:
    """Adds ``played(a, b)`` (the model's output heard over samples [a, b)) ``delay`` later."""

    def __init__(self, level_db: float, delay_ms: float, played):
        self.gain = 10 ** (level_db / 20)
        self.delay = _samples(delay_ms)
        self.played = played

    def process(self, x: np.ndarray, start: int) -> np.ndarray:
        if self.played is None:
            return x
        a = start - self.delay
        return x + self.gain * self.played(a, a + len(x))


def _open(stage: Stage, seed: int, k: int, level: float, played):
    s = (seed * 31 + k) & 0xFFFFFFFF  # each stage of a chain draws its own numbers
    if stage.kind == "noise":
        return _Noise(stage.name, stage.a, s, level)
    if stage.kind == "phone":
        return _Phone()
    if stage.kind == "room":
        return _Room(stage.a, s)
    return _Echo(stage.a, stage.b, played)


def track_source(track: np.ndarray) -> Callable[[int, int], np.ndarray]:
    """``played`` over a known track: samples [a, b), zeros before 0 and past its end."""
    track = np.asarray(track, dtype=np.float32)

    def played(a: int, b: int) -> np.ndarray:
        out = np.zeros(b - a, dtype=np.float32)
        lo, hi = max(a, 0), min(b, len(track))
        if hi > lo:
            out[lo - a: hi - a] = track[lo:hi]
        return out

    return played


def apply(spec: str | Channel, x: np.ndarray, *, seed: int = 0, speech: float | None = None,
          played: np.ndarray | None = None) -> np.ndarray:
    """``x`` (16 kHz mono) through the channel, whole: the pure function the sessions run
    piecewise. ``speech``: the active level the SNR is against (default: ``x``'s);
    ``played``: the model's output on the same clock (the echo's source)."""
    channel = parse(spec) if isinstance(spec, str) else spec
    x = np.asarray(x, dtype=np.float32)
    if channel.clean:
        return x.copy()
    level = active_level(x) if speech is None else speech
    chain = channel.open(seed, level, None if played is None else track_source(played))
    return chain.process(x)
