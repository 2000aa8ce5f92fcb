"""Voice activity detection over a model's output track (docs/timeline.md).

``speech_spans(samples, sample_rate)`` returns the raw speech intervals of one recording, in
seconds from its first sample. Four steps, split so each can be measured and tested alone:

1. ``speech_probabilities``: silero-vad 6.2.3 (weights ship inside its wheel, loaded once per
   process, lazily; run through ONNX Runtime or TorchScript, ``vad_network``) gives one speech
   probability per 32 ms frame of 16 kHz audio.
2. ``spans_from_probabilities``: silero's own hysteresis turns them into spans (pure);
   ``split_quiet`` cuts out of them the stretches of 0.3 s or more 20 dB under the span's
   speech level (silero is level-blind: it runs on over breath, murmur and hum).
3. ``refine_edges``: each edge is moved to where the energy envelope says speech starts or
   stops, at most ``refine_onset_ms`` / ``refine_offset_ms`` outward (pure). Silero quantises
   edges to 32 ms frames, misses unvoiced onsets and holds on ~50-150 ms after speech.
   Every level is relative to the speech around the span (``speech_level``), not the track:
   breath, murmur, hum, decaying tails and a click before the speech are not speech, and a
   pause silero kept closes only over speech-level audio (``keep_pauses``).
4. ``attach_islands``: a word silero scored below threshold right next to a span (a short
   interjection before a pause), at speech level, is added as a span of its own (pure).
5. ``is_tone``: a span that is a tone (a sine, a beep, a siren: in most of its frames nearly
   all the energy within +-62 Hz of one frequency) is dropped: tones are not speech. Silero
   alone scores some as speech (the first 0.35 s of a 220 Hz sine, a tone amplitude-modulated
   at a syllable rate in full), and a model that beeped passed take_turn there (pure).

Steps 2-5 are ``postprocess``. Audio that never rises above ``SILENCE_DBFS`` is silent
without running the network, and inside a recording the network skips quiet stretches more
than ``skip_quiet_ms`` from louder audio (an output track is mostly silence; on the bundled
fixtures and the built-in models' outputs the segments are the same as with every frame run:
benchmarks/harness_performance.py, docs/benchmarks.md). Measured accuracy: docs/timeline.md,
benchmarks/vad_accuracy.py.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..data import audio
from ..data.timeline import Span
from . import vad_network

VAD_SAMPLE_RATE = 16_000
FRAME = 512  # silero-vad's frame at 16 kHz (32 ms)

# Every 32 ms frame quieter than this (RMS) -> silence, no network. Model output at -60 dBFS
# is inaudible next to speech at -20 to -30 dBFS.
SILENCE_DBFS = -60.0


@dataclass(frozen=True)
class VadParams:
    """The VAD's knobs; the defaults are the measured choice (docs/timeline.md).

    ``threshold``: frame probability at or above which speech starts; ``neg_threshold``: below
    which it may end (silero's default is threshold - 0.15). ``min_silence_ms``: a pause must
    last this long to split a span. ``min_speech_ms``: shorter spans are dropped (clicks,
    breaths). ``refine_onset_ms`` / ``refine_offset_ms``: how far an edge may move to the
    energy envelope (0 = off). ``attach_ms``: how far from a span a word silero missed may
    be recovered (``attach_islands``; 0 = off). ``skip_quiet_ms``: audio below SILENCE_DBFS
    farther than this from louder audio skips the network (``speech_probabilities``; 0 = the
    network sees every frame)."""

    threshold: float = 0.5
    neg_threshold: float | None = None
    min_speech_ms: int = 100
    min_silence_ms: int = 100
    refine_onset_ms: int = 200
    refine_offset_ms: int = 200
    attach_ms: int = 300
    skip_quiet_ms: int = 1000

    def __post_init__(self):
        if not 0.0 < self.threshold < 1.0:
            raise ValueError(f"VAD threshold must be in (0, 1), got {self.threshold}")
        if self.neg_threshold is not None and not 0.0 < self.neg_threshold <= self.threshold:
            raise ValueError(f"VAD neg_threshold must be in (0, threshold], got "
                             f"{self.neg_threshold}")
        for name in ("min_speech_ms", "min_silence_ms", "refine_onset_ms", "refine_offset_ms",
                     "attach_ms", "skip_quiet_ms"):
            if getattr(self, name) < 0:
                raise ValueError(f"VAD {name} must be >= 0, got {getattr(self, name)}")


DEFAULT_PARAMS = VadParams()

def _load():
    """Load the network of the process's backend now (benchmarks warm it up before timing)."""
    if vad_network.backend() == "onnx":
        return vad_network._session()
    return vad_network._torch()


def as_mono(samples: np.ndarray, sample_rate: int) -> np.ndarray:
    """Validated 1-D float32 audio at the VAD's rate."""
    x = np.asarray(samples)
    if x.ndim != 1:
        raise ValueError(f"VAD input must be mono (1-D), got shape {x.shape}")
    if not isinstance(sample_rate, (int, np.integer)) or sample_rate <= 0:
        raise ValueError(f"VAD sample rate must be a positive integer, got {sample_rate!r}")
    if x.dtype.kind not in "fi":
        raise ValueError(f"VAD input must be float or signed PCM audio, got dtype {x.dtype}")
    if x.dtype.kind == "i":  # PCM integers -> [-1, 1)
        x = x.astype(np.float32) / float(np.iinfo(x.dtype).max + 1)
    x = x.astype(np.float32, copy=False)
    if not np.all(np.isfinite(x)):
        raise ValueError("VAD input contains NaN or infinite samples")
    return audio.resample(x, int(sample_rate), VAD_SAMPLE_RATE)


def frame_dbfs(x: np.ndarray, frame: int) -> np.ndarray:
    """RMS level of consecutive ``frame``-sample frames in dBFS (the last one zero-padded)."""
    if len(x) == 0:
        return np.zeros(0)
    n = -(-len(x) // frame)
    padded = np.zeros(n * frame, dtype=np.float64)
    padded[: len(x)] = x
    power = np.mean(padded.reshape(n, frame) ** 2, axis=1)
    return 10.0 * np.log10(np.maximum(power, 1e-20))


def is_silent(x: np.ndarray) -> bool:
    """True when every 32 ms frame of 16 kHz audio is below SILENCE_DBFS."""
    if len(x) == 0 or float(np.abs(x).max()) < 10 ** (SILENCE_DBFS / 20):
        return True  # no frame's RMS exceeds the peak sample (the common all-zero output)
    return float(frame_dbfs(x, FRAME).max()) < SILENCE_DBFS


def active_frames(x: np.ndarray, context_ms: int) -> np.ndarray:
    """Which 32 ms frames the network must see: every frame at or above SILENCE_DBFS and every
    frame within ``context_ms`` of one (silero needs a lead-in to warm up and a tail to decay)."""
    loud = frame_dbfs(x, FRAME) >= SILENCE_DBFS
    reach = int(np.ceil(context_ms / 1000 * VAD_SAMPLE_RATE / FRAME))
    if reach <= 0 or not loud.any():
        return loud
    # dilate by ``reach`` frames either side: a frame is active when a loud one is that near
    near = np.convolve(loud.astype(np.int32), np.ones(2 * reach + 1, np.int32))
    return near[reach: reach + len(loud)] > 0


def speech_probabilities(x: np.ndarray, skip_quiet_ms: int = 0,
                         backend: str | None = None) -> np.ndarray:
    """One silero speech probability per 32 ms frame of 16 kHz mono float32 audio, through
    ``backend`` (``vad_network``: onnx or torch; default the process's choice).

    ``skip_quiet_ms`` > 0: frames below SILENCE_DBFS and farther than that from any louder
    frame skip the network and get probability 0 (a model's output track is mostly silence;
    the network is the harness's main cost). The network's state runs on across a skipped
    stretch as if the frames kept were contiguous."""
    n = -(-len(x) // FRAME)
    run = np.ones(n, dtype=bool) if skip_quiet_ms <= 0 else active_frames(x, skip_quiet_ms)
    probs = np.zeros(n, dtype=np.float32)
    probs[run] = vad_network.probabilities(x, run, backend)
    return probs


def spans_from_probabilities(probs: np.ndarray, n_samples: int,
                             params: VadParams = DEFAULT_PARAMS) -> list[tuple[int, int]]:
    """Speech intervals in samples from frame probabilities: silero's own hysteresis
    (``silero_vad.get_speech_timestamps_from_probs``) with no padding (padding would move every
    edge by a constant and hide real errors) and no length cap, the only way it is called.

    Its state machine is written out here because silero's module imports torch on its first
    line, 2 s of CPU per process for 30 lines of arithmetic; tests/listen/test_vad_spans.py
    holds it equal to silero's own on random and edge-case probabilities."""
    threshold = params.threshold
    neg = params.neg_threshold if params.neg_threshold is not None else max(threshold - 0.15,
                                                                             0.01)
    min_speech = VAD_SAMPLE_RATE * params.min_speech_ms / 1000
    min_silence = VAD_SAMPLE_RATE * params.min_silence_ms / 1000
    spans: list[tuple[int, int]] = []
    start: int | None = None  # the open span's first sample (None: not in speech)
    quiet_from = 0  # where the current dip below ``neg`` began (0: none; silero's temp_end)
    for i, p in enumerate(float(p) for p in probs):
        at = FRAME * i
        if p >= threshold:
            quiet_from = 0
            if start is None:
                start = at
                continue
        if start is not None and p < neg:
            quiet_from = quiet_from or at
            if at - quiet_from >= min_silence:
                if quiet_from - start > min_speech:
                    spans.append((start, min(n_samples, quiet_from)))
                start, quiet_from = None, 0
    if start is not None and n_samples - start > min_speech:
        spans.append((start, n_samples))
    return spans


# Energy envelope for edge refinement: 8 ms windows every 2 ms.
_ENV_WIN = 128
_ENV_HOP = 32


def energy_envelope(x: np.ndarray, window: int = _ENV_WIN) -> np.ndarray:
    """Short-time RMS level in dBFS over ``window`` samples (8 ms by default), one value per
    2 ms hop (window centred on the hop)."""
    if len(x) == 0:
        return np.zeros(0)
    sq = np.concatenate([[0.0], np.cumsum(np.asarray(x, dtype=np.float64) ** 2)])
    centres = np.arange(0, len(x), _ENV_HOP)
    lo = np.clip(centres - window // 2, 0, len(x))
    hi = np.clip(centres + window // 2, 0, len(x))
    power = (sq[hi] - sq[lo]) / np.maximum(hi - lo, 1)
    return 10.0 * np.log10(np.maximum(power, 1e-20))


def _envelope(x: np.ndarray, envs: dict | None, window: int = _ENV_WIN) -> np.ndarray:
    """``energy_envelope(x, window)``, kept in ``envs`` (one per ``postprocess`` call: the
    steps share it; the envelope is most of their cost)."""
    if envs is None:
        return energy_envelope(x, window)
    if window not in envs:
        envs[window] = energy_envelope(x, window)
    return envs[window]


# An edge sits where the envelope crosses max(span peak - BELOW_PEAK_DB, noise + ABOVE_NOISE_DB);
# quieter stretches shorter than BRIDGE_MS (stop closures) do not end the search. 55 dB is where
# the fixture generator trims a phrase; 3 dB over the median noise is ~5 standard deviations of
# an 8 ms white-noise envelope. Both measured in docs/timeline.md.
BELOW_PEAK_DB = 55.0
ABOVE_NOISE_DB = 3.0
BRIDGE_MS = 60
# Where the noise floor sets the threshold (noise + ABOVE_NOISE_DB > peak - BELOW_PEAK_DB), an
# offset may move this many times refine_offset_ms: silero's offsets in -35 dBFS white noise
# were 150-250 ms late, beyond the 200 ms reach, and stayed there (offset p95 215 -> 53 ms).
NOISY_REACH = 2
# Local speech level: a span's LEVEL_PERCENTILE-th percentile 8 ms envelope level (its loud
# syllables; a click does not move it); for cutting silero's spans, of its loudest second.
# Audio SPEECH_BELOW_LEVEL_DB or more under the adjacent span's level is not speech on its
# own: breath, murmur, hum and decaying tails sit 20-30 dB down on real model output. Quieter
# audio (a fricative, a release burst, a decay) still extends an edge when it hangs on
# speech-level audio for at most WEAK_MAX_MS; a longer quiet stretch is something else, and
# the edge stays on the speech.
LEVEL_PERCENTILE = 90
SPEECH_BELOW_LEVEL_DB = 20.0
WEAK_MAX_MS = 160
BEYOND_LOUD_SHARE = 0.25
# A pause silero kept (at least KEEP_PAUSE_MS) stays at least that long unless the audio in it
# is at speech level (``keep_pauses``); so do quiet stretches inside a silero span
# (``split_quiet``).
KEEP_PAUSE_MS = 300
# A silero span whose speech level is SPEECH_BELOW_LEVEL_DB or more under that of a span
# within NEIGHBOUR_S of it is not speech either (murmur or breath silero scored on its own).
NEIGHBOUR_S = 5.0


def speech_level(env: np.ndarray, a: int, b: int, loudest_second: bool = False) -> float:
    """The local speech level (dBFS) of envelope indices [a, b): the ``LEVEL_PERCENTILE``-th
    percentile. ``loudest_second``: the highest such percentile over its 1 s windows (a span
    silero ran on over long murmur is mostly murmur; its speech is not)."""
    seg = env[a: max(b, a + 1)]
    block = int(VAD_SAMPLE_RATE / _ENV_HOP)
    if len(seg) <= block or not loudest_second:
        return float(np.percentile(seg, LEVEL_PERCENTILE))
    starts = range(0, len(seg) - block // 2, block // 2)
    return max(float(np.percentile(seg[i: i + block], LEVEL_PERCENTILE)) for i in starts)


def noise_floor(env: np.ndarray, spans: list[tuple[int, int]], q: float = 10) -> float:
    """The channel's background level (dBFS): the 10th (``q``-th) percentile of the envelope
    outside silero's spans (kept 0.1 s clear of them), or of all of it when under 0.2 s of the
    recording is outside. A low percentile, not the median: what silero left out may still
    hold a word it missed."""
    outside = np.ones(len(env), dtype=bool)
    guard = int(0.1 * VAD_SAMPLE_RATE)
    for s, e in spans:
        outside[max(0, (s - guard) // _ENV_HOP): (e + guard) // _ENV_HOP + 1] = False
    if outside.sum() * _ENV_HOP >= 0.2 * VAD_SAMPLE_RATE:
        return float(np.percentile(env[outside], q))
    return float(np.percentile(env, q))


def _noise_limited(peak: float, noise: float) -> bool:
    return noise + ABOVE_NOISE_DB > peak - BELOW_PEAK_DB


def _env_range(s: int, e: int) -> tuple[int, int]:
    return s // _ENV_HOP, max(s // _ENV_HOP + 1, -(-e // _ENV_HOP))  # env indices [a, b)


def refine_edges(x: np.ndarray, spans: list[tuple[int, int]], onset_ms: int,
                 offset_ms: int | None = None, strict: bool = False,
                 envs: dict | None = None) -> list[tuple[int, int]]:
    """Move each span edge to where the speech around it really starts or stops, searching at
    most ``onset_ms`` / ``offset_ms`` either side of silero's edge. Spans keep their order and
    never overlap.

    Silero reacts late to unvoiced onsets ("s", "f", "h") and holds on ~0.1 s after speech
    stops; the energy envelope does not. The search starts from the speech-level frame
    (``SPEECH_BELOW_LEVEL_DB`` under the span's ``speech_level``) nearest silero's edge on its
    inner side, so a click before the speech is no onset, then walks outward over loud frames,
    bridging quiet runs shorter than ``BRIDGE_MS``. "Loud" is relative both to the span's
    peak and to the channel's noise floor (``noise_floor``), so quiet speech and a noisy
    channel behave alike; a stretch of loud frames under speech level longer than
    ``WEAK_MAX_MS`` or running on past the reach (breath, murmur, hum, a decaying tail) is not
    walked over. ``strict``: only speech-level frames are walked over. An edge with no loud
    frame in reach stays where silero put it."""
    if offset_ms is None:
        offset_ms = onset_ms
    if (onset_ms <= 0 and offset_ms <= 0) or not spans:
        return list(spans)
    env = _envelope(x, envs)
    noise = noise_floor(env, spans)
    per_hop = VAD_SAMPLE_RATE / 1000 / _ENV_HOP
    r_on, r_off = int(round(onset_ms * per_hop)), int(round(offset_ms * per_hop))
    bridge = int(round(BRIDGE_MS * per_hop))
    weak_max = int(round(WEAK_MAX_MS * per_hop))
    out: list[tuple[int, int]] = []
    for k, (s, e) in enumerate(spans):
        a, b = _env_range(s, e)
        peak = float(env[a:b].max())
        speech = env >= max(speech_level(env, a, b) - SPEECH_BELOW_LEVEL_DB,
                            noise + ABOVE_NOISE_DB)
        loud = speech if strict else env >= max(peak - BELOW_PEAK_DB, noise + ABOVE_NOISE_DB)
        # in noise silero holds on longer (150-250 ms at -35 dBFS white noise): reach further
        reach_off = r_off * NOISY_REACH if _noise_limited(peak, noise) else r_off
        prev_end = out[-1][1] // _ENV_HOP + 1 if out else 0
        next_start = spans[k + 1][0] // _ENV_HOP - 1 if k + 1 < len(spans) else len(env) - 1
        a2 = _edge(loud, speech, a, max(prev_end, a - r_on), min(b - 1, a + r_on), b - 1, -1,
                   bridge, weak_max, prev_end) if r_on > 0 else a
        b2 = _edge(loud, speech, b - 1, max(a2, b - 1 - reach_off),
                   min(next_start, b - 1 + reach_off), a2, 1, bridge, weak_max, next_start) \
            if r_off > 0 else b - 1
        start = min(max(0, a2 * _ENV_HOP), len(x))
        end = min(max(start + _ENV_HOP, (b2 + 1) * _ENV_HOP), len(x))
        out.append((start, end))
    return out


def _edge(loud: np.ndarray, speech: np.ndarray, i: int, lo: int, hi: int, inner: int,
          outward: int, bridge: int, weak_max: int, stop: int) -> int:
    """An edge near envelope index ``i`` within [lo, hi]: seeded on the speech-level frame
    nearest ``i`` on the inner side, as far in as ``inner`` (the span's other end: silero may
    have run on over quiet audio past the reach), then walked outward over ``loud`` frames.
    The walk keeps only ``weak_max`` frames beyond the same walk over ``speech`` frames, and
    none when ``BEYOND_LOUD_SHARE`` of the ``2 * bridge`` frames past its end are loud too
    (it stopped in a dip of continuous audio, or at the reach, not at a quiet edge); ``stop``,
    the neighbouring span's edge, bounds that look (a walk that reached the neighbour is
    ``keep_pauses``'s to judge). With no speech-level frame, the outermost ``loud`` one."""
    seed = _outermost(speech, i, lo, inner, outward, bridge, inner_only=True) if outward < 0 \
        else _outermost(speech, i, inner, hi, outward, bridge, inner_only=True)
    if seed is None:
        return _outermost(loud, i, lo, hi, outward, bridge)
    lo, hi = (lo, seed) if outward < 0 else (seed, hi)
    if hi < lo:
        return seed
    walk = _outermost(loud, seed, lo, hi, outward, bridge)
    firm = _outermost(speech, seed, lo, hi, outward, bridge)
    # beyond a real edge is quiet; beyond a dip in murmur or hum, or the reach limit, is more
    beyond = loud[max(stop, walk - 2 * bridge): walk] if outward < 0 \
        else loud[walk + 1: min(stop, walk + 2 * bridge) + 1]
    if abs(walk - firm) > weak_max or (len(beyond) and beyond.mean() >= BEYOND_LOUD_SHARE):
        return firm
    return walk


def _outermost(loud: np.ndarray, i: int, lo: int, hi: int, outward: int, bridge: int,
               inner_only: bool = False):
    """The speech edge near envelope index ``i`` within [lo, hi]: start from the loud frame
    nearest ``i`` on the inner side (onset: at or after ``i``; offset: at or before), then walk
    ``outward`` (-1 = earlier, +1 = later) over loud frames, bridging quiet runs of at most
    ``bridge`` frames. ``i`` itself when the range has no loud frame on the inner side.
    ``inner_only``: that inner frame itself, or None."""
    if hi < lo:
        return None if inner_only else i
    idx = lo + np.flatnonzero(loud[lo: hi + 1])
    i = min(max(i, lo), hi)
    inner = idx[idx >= i] if outward < 0 else idx[idx <= i]
    if len(inner) == 0:
        return None if inner_only else i
    if inner_only:
        return int(inner[0] if outward < 0 else inner[-1])
    if outward < 0:
        seq = idx[idx <= inner[0]][::-1]  # from the inner start, going earlier
    else:
        seq = idx[idx >= inner[-1]]  # from the inner end, going later
    steps = np.abs(np.diff(seq))
    broken = np.flatnonzero(steps > bridge + 1)
    return int(seq[broken[0]] if len(broken) else seq[-1])


def split_quiet(x: np.ndarray, spans: list[tuple[int, int]],
                envs: dict | None = None) -> list[tuple[int, int]]:
    """Cut out of each silero span every stretch of at least ``KEEP_PAUSE_MS`` where a 64 ms
    envelope stays ``SPEECH_BELOW_LEVEL_DB`` or more under the span's ``speech_level``, keep
    a piece so cut out only when it comes within ``ISLAND_BELOW_LEVEL_DB`` of that level (as
    a word silero missed must), and drop a span that is ``SPEECH_BELOW_LEVEL_DB`` under the
    loudest span within ``NEIGHBOUR_S`` (a distractor 15 dB down stays speech): silero is
    level-blind and runs on over breath, murmur and hum between phrases, or scores them as
    speech on their own. Refinement then places the edges of what is kept."""
    if not spans:
        return list(spans)
    env = _envelope(x, envs)
    smooth = _envelope(x, envs, NOISY_WINDOW)
    min_run = int(round(KEEP_PAUSE_MS * VAD_SAMPLE_RATE / 1000 / _ENV_HOP))
    near = int(NEIGHBOUR_S * VAD_SAMPLE_RATE)
    levels = [speech_level(env, *_env_range(s, e), loudest_second=True) for s, e in spans]
    out: list[tuple[int, int]] = []
    for k, (s, e) in enumerate(spans):
        a, b = _env_range(s, e)
        local = max(lv for (s2, e2), lv in zip(spans, levels) if s2 - near <= e and s <= e2 + near)
        if levels[k] < local - SPEECH_BELOW_LEVEL_DB:
            continue  # no speech-level audio at all
        floor = levels[k] - SPEECH_BELOW_LEVEL_DB
        quiet = smooth[a:b] < floor
        if quiet.sum() < min_run:
            out.append((s, e))
            continue
        edges = np.flatnonzero(np.diff(np.concatenate([[0], quiet.astype(np.int8), [0]])))
        pieces, pos = [], a
        for q0, q1 in zip(edges[::2] + a, edges[1::2] + a):  # quiet runs [q0, q1)
            if q1 - q0 >= min_run:
                pieces.append((pos, q0))
                pos = q1
        pieces.append((pos, b))
        for p0, p1 in pieces:
            if p1 > p0 and speech_level(env, p0, p1, loudest_second=True) >= \
                    levels[k] - ISLAND_BELOW_LEVEL_DB:
                out.append((s if p0 == a else p0 * _ENV_HOP,
                            e if p1 == b else min(len(x), p1 * _ENV_HOP)))
    return out


def keep_pauses(x: np.ndarray, kept: list[tuple[int, int]], refined: list[tuple[int, int]],
                onset_ms: int, offset_ms: int, envs: dict | None = None) -> list[tuple[int, int]]:
    """Where refinement shrank a pause that silero kept (at least ``KEEP_PAUSE_MS`` between
    ``kept`` spans) below that length, place the two edges of that pause again walking over
    speech-level audio only (``refine_edges`` with ``strict``): a pause closes only over audio
    at speech level. ``kept`` and ``refined`` pair one to one."""
    keep = int(round(KEEP_PAUSE_MS * VAD_SAMPLE_RATE / 1000))
    closed = [k for k in range(len(kept) - 1) if kept[k + 1][0] - kept[k][1] >= keep
              and refined[k + 1][0] - refined[k][1] < keep]
    if not closed:
        return list(refined)
    strict = refine_edges(x, kept, onset_ms, offset_ms, strict=True, envs=envs)
    out = list(refined)
    for k in closed:
        out[k] = (out[k][0], strict[k][1])
        out[k + 1] = (strict[k + 1][0], out[k + 1][1])
    return [(s, max(e, s + _ENV_HOP)) for s, e in out]


# In noise, the 8 ms envelope cannot tell a speech tail from the noise until the tail is about
# as loud as the noise (3 dB over its floor); a 64 ms envelope varies ~0.2 dB in white noise, so
# 0.7 dB over its floor hears tails ~8 dB weaker. Measured on the noise grid (docs/timeline.md):
# -35 dBFS white noise, offset |error| p95 64 -> 27 ms, onset 36 -> 18 ms; 32 ms windows and 1 dB
# gained less. Its edges sit ~a quarter window outward: NOISY_BACK_MS corrects that.
NOISY_WINDOW = 1024
NOISY_ABOVE_NOISE_DB = 0.7
NOISY_BACK_MS = 24
# A steady background: its 64 ms envelope's 10th to 90th percentile within this (white noise
# or hum: under 1 dB; another voice: 10 dB and more).
STEADY_NOISE_DB = 3.0


def extend_in_noise(x: np.ndarray, spans: list[tuple[int, int]],
                    envs: dict | None = None) -> list[tuple[int, int]]:
    """Where the noise floor, not the span's own peak, sets the edge threshold of
    ``refine_edges`` (``noise + ABOVE_NOISE_DB > peak - BELOW_PEAK_DB``: never on clean
    audio), carry each edge outward over the contiguous stretch where a 64 ms envelope stays
    ``NOISY_ABOVE_NOISE_DB`` over its own noise floor, less ``NOISY_BACK_MS``; never into a
    neighbouring span. Other spans, and every span when the background is not steady
    (``STEADY_NOISE_DB``), are returned as they are."""
    if not spans:
        return list(spans)
    env = _envelope(x, envs)
    noise = noise_floor(env, spans)
    smooth = None
    back = int(round(NOISY_BACK_MS * VAD_SAMPLE_RATE / 1000 / _ENV_HOP))
    out: list[tuple[int, int]] = []
    for k, (s, e) in enumerate(spans):
        a, b = s // _ENV_HOP, max(s // _ENV_HOP + 1, -(-e // _ENV_HOP))  # env indices [a, b)
        if noise + ABOVE_NOISE_DB <= float(env[a:b].max()) - BELOW_PEAK_DB:
            out.append((s, e))
            continue
        if smooth is None:
            smooth = _envelope(x, envs, NOISY_WINDOW)
            floor = noise_floor(smooth, spans)
            if noise_floor(smooth, spans, 90) - floor > STEADY_NOISE_DB:
                return list(spans)  # murmur or babble: no steady floor to measure tails against
            above = smooth >= floor + NOISY_ABOVE_NOISE_DB
        lo = out[-1][1] // _ENV_HOP + 1 if out else 0
        hi = spans[k + 1][0] // _ENV_HOP - 1 if k + 1 < len(spans) else len(env) - 1
        a2, b2 = a, b - 1
        while a2 - 1 >= lo and above[a2 - 1]:
            a2 -= 1
        while b2 + 1 <= hi and above[b2 + 1]:
            b2 += 1
        a2, b2 = min(a, a2 + back), max(b - 1, b2 - back)
        out.append((a2 * _ENV_HOP, min(len(x), max(e, (b2 + 1) * _ENV_HOP))))
    return out


# A word silero missed: a loud island (bridged like an edge) of at least ISLAND_MIN_MS, whose
# 75th-percentile level is within ISLAND_BELOW_LEVEL_DB of its neighbour's speech level (a
# word, not a breath, murmur or a click; a percentile, so the neighbour's own onset bleeding
# into the island's first 8 ms windows does not lift it), and where silero gave some frame
# at least ISLAND_MIN_PROB (it heard something voice-like).
ISLAND_MIN_MS = 60
ISLAND_BELOW_LEVEL_DB = 15.0
ISLAND_MIN_PROB = 0.15


def attach_islands(x: np.ndarray, spans: list[tuple[int, int]], probs: np.ndarray,
                   attach_ms: int, envs: dict | None = None) -> list[tuple[int, int]]:
    """Add, as spans of their own, the words silero missed next to its spans.

    Silero can score a short interjection before a pause ("Oh, she has ...", "Which two, ...")
    far below its threshold while the envelope plainly shows a word; such an onset would come
    0.3-0.5 s late. An island of loud envelope frames within ``attach_ms`` of a span, passing
    the ISLAND_* tests, becomes a span; its gap to the neighbour is kept (hold_floor measures
    gaps on these spans). Repeats, so a chain of missed words is recovered word by word."""
    if attach_ms <= 0 or not spans:
        return list(spans)
    env = _envelope(x, envs)
    noise = noise_floor(env, spans)
    per_hop = VAD_SAMPLE_RATE / 1000 / _ENV_HOP
    reach, bridge = int(round(attach_ms * per_hop)), int(round(BRIDGE_MS * per_hop))
    min_len = int(round(ISLAND_MIN_MS * per_hop))
    out = sorted(spans)
    for _ in range(20):  # each round adds at most one island per span edge
        added = []
        for k, (s, e) in enumerate(out):
            a, b = s // _ENV_HOP, -(-e // _ENV_HOP)
            peak, level = float(env[a:b].max()), speech_level(env, a, b)
            loud = env >= max(peak - BELOW_PEAK_DB, noise + ABOVE_NOISE_DB)
            prev_end = -(-out[k - 1][1] // _ENV_HOP) if k else 0
            next_start = out[k + 1][0] // _ENV_HOP if k + 1 < len(out) else len(env)
            for lo, hi, side in ((prev_end, a, -1), (b, next_start, 1)):
                run = _nearest_run(loud[lo:hi], side, bridge)
                if run is None:
                    continue
                i0, i1 = lo + run[0], lo + run[1]  # env indices, inclusive
                if (a - 1 - i1 if side < 0 else i0 - b) > reach:
                    continue  # too far from this span
                if (side < 0 and k > 0 and i0 <= prev_end) or \
                        (side > 0 and k + 1 < len(out) and i1 >= next_start - 1):
                    continue  # it runs into the other neighbour: that span's edge, not a word
                f0, f1 = (i0 * _ENV_HOP) // FRAME, -(-((i1 + 1) * _ENV_HOP) // FRAME)
                if i1 - i0 + 1 >= min_len and np.percentile(env[i0: i1 + 1], 75) >= \
                        level - ISLAND_BELOW_LEVEL_DB \
                        and probs[f0:f1].max(initial=0.0) >= ISLAND_MIN_PROB:
                    added.append((i0 * _ENV_HOP, min(len(x), (i1 + 1) * _ENV_HOP)))
        if not added:
            break
        out = _disjoint(sorted(out + added))
    return out


def _nearest_run(loud: np.ndarray, side: int, bridge: int) -> tuple[int, int] | None:
    """The run of loud frames (gaps up to ``bridge`` bridged) nearest the span: the last run
    when the span is after the range (``side`` -1), the first when it is before (+1)."""
    idx = np.flatnonzero(loud)
    if not len(idx):
        return None
    breaks = np.flatnonzero(np.diff(idx) > bridge + 1)
    starts = np.concatenate(([idx[0]], idx[breaks + 1]))
    ends = np.concatenate((idx[breaks], [idx[-1]]))
    k = -1 if side < 0 else 0
    return int(starts[k]), int(ends[k])


def _disjoint(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in spans:
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


# A frame's share of energy within +-2 FFT bins (+-62 Hz) of its peak: a tone's is about 1.0;
# voiced speech spreads over harmonics and formants (at most 0.72, the median over a span's
# frames, on every span of the bundled fixtures and the built-in reply).
TONE_SHARE = 0.95


def is_tone(x: np.ndarray) -> bool:
    """Whether 16 kHz audio ``x`` (one span) is a tone rather than speech: the median over its
    audible 32 ms frames of the energy share near each frame's spectral peak is at least
    ``TONE_SHARE`` (a frame at a time, so a sweeping tone counts too)."""
    if len(x) < FRAME:
        x = np.pad(x, (0, FRAME - len(x)))
    frames = np.lib.stride_tricks.sliding_window_view(x, FRAME)[::FRAME // 2]
    power = np.abs(np.fft.rfft(frames * np.hanning(FRAME), axis=1)) ** 2
    energy = power.sum(axis=1)
    power, energy = power[energy > energy.max() * 1e-3], energy[energy > energy.max() * 1e-3]
    if not len(energy):
        return False
    bins = np.arange(power.shape[1])
    near = np.abs(bins[None, :] - power.argmax(axis=1)[:, None]) <= 2
    return float(np.median((power * near).sum(axis=1) / energy)) >= TONE_SHARE


def postprocess(x: np.ndarray, probs: np.ndarray,
                params: VadParams = DEFAULT_PARAMS) -> list[tuple[int, int]]:
    """Silero's frame probabilities -> refined speech spans in samples (steps 2-5 of the module
    doc); pure, so a benchmark can try parameters on one network pass."""
    envs: dict = {}
    kept = split_quiet(x, spans_from_probabilities(probs, len(x), params), envs)
    spans = refine_edges(x, kept, params.refine_onset_ms, params.refine_offset_ms, envs=envs)
    if params.refine_onset_ms > 0 or params.refine_offset_ms > 0:
        spans = keep_pauses(x, kept, extend_in_noise(x, spans, envs), params.refine_onset_ms,
                            params.refine_offset_ms, envs)
    spans = attach_islands(x, spans, probs, params.attach_ms, envs)
    return [(s, e) for s, e in spans if not is_tone(x[s:e])]


@functools.lru_cache(maxsize=4)
def _implementation(backend: str) -> dict:
    """What else a result depends on: this module's and the network runner's source (any edit
    invalidates cached results), the network's version, the backend that ran it (onnx or
    torch: equal spans were measured, not guaranteed) and that backend's version."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        silero = version("silero-vad")
    except PackageNotFoundError:
        silero = None
    code = hashlib.sha256(Path(__file__).read_bytes()
                          + Path(vad_network.__file__).read_bytes()).hexdigest()
    return {"code_sha256": code, "silero_vad": silero, **vad_network.versions(backend)}


def cache_request(x: np.ndarray, params: VadParams) -> dict:
    """The cache key material (remote/cache.py ``RequestCache``) of ``speech_spans`` on 16 kHz
    float32 audio ``x``: the audio by its sha256, every parameter, the implementation."""
    return {"endpoint": "vad/speech_spans", "audio_sha256": hashlib.sha256(
                np.ascontiguousarray(x, dtype=np.float32).tobytes()).hexdigest(),
            "samples": int(len(x)), "sample_rate": VAD_SAMPLE_RATE, "params": asdict(params),
            **_implementation(vad_network.backend())}


def speech_spans(samples: np.ndarray, sample_rate: int,
                 params: VadParams = DEFAULT_PARAMS, cache=None) -> list[Span]:
    """Raw speech intervals of a mono track, seconds from its first sample, sorted and
    disjoint. Any sample rate; the VAD runs at 16 kHz.

    ``cache``: a ``remote.cache.RequestCache``; the result for the same audio, parameters and
    implementation is read from it instead of being computed (re-scoring a run from disk
    would otherwise spend nearly all its time here: docs/benchmarks.md)."""
    x = as_mono(samples, sample_rate)
    if is_silent(x):
        return []
    request = None if cache is None else cache_request(x, params)
    if request is not None:
        hit = cache.get(request)
        if isinstance(hit, dict) and isinstance(hit.get("spans"), list):
            return [Span(float(a), float(b)) for a, b in hit["spans"]]
    spans = postprocess(x, speech_probabilities(x, params.skip_quiet_ms), params)
    out = [Span(s / VAD_SAMPLE_RATE, e / VAD_SAMPLE_RATE) for s, e in spans]
    if request is not None:
        cache.put(request, {"spans": [[sp.start, sp.end] for sp in out]})
    return out
