"""Why a trial's output held no speech the rules could score, in words a model developer can
act on: sound that the VAD did not hear as speech (a tone, noise, a broken decoder), and native
transcript words that fell in no speech segment. Added to a miss's reason; never scored."""

from __future__ import annotations

import numpy as np

SOUND_DBFS = -40.0  # a 20 ms frame louder than this is sound
FRAME_S = 0.02
MIN_SOUND_S = 0.1


def sound_seconds(samples: np.ndarray, sample_rate: int) -> float:
    """Seconds of 20 ms frames whose RMS is above SOUND_DBFS."""
    n = int(sample_rate * FRAME_S)
    x = np.asarray(samples, dtype=np.float32)
    if n <= 0 or len(x) < n:
        return 0.0
    frames = x[: len(x) // n * n].reshape(-1, n).astype(np.float64)
    rms = np.sqrt(np.mean(frames * frames, axis=1))
    return float(np.count_nonzero(rms > 10 ** (SOUND_DBFS / 20)) * FRAME_S)


def no_speech_diagnosis(samples: np.ndarray, sample_rate: int, timeline) -> str | None:
    """A sentence when the output sounded but held no detected speech, or carried native
    words outside every speech segment; None otherwise."""
    parts = []
    if not timeline.speech_spans:
        loud = sound_seconds(samples, sample_rate)
        if loud >= MIN_SOUND_S:
            parts.append(f"the output has {loud:.1f} s of sound above {SOUND_DBFS:.0f} dBFS but "
                         "no speech was detected (tones and noise are not speech)")
    if timeline.unaligned:
        parts.append(f"{len(timeline.unaligned)} native transcript word(s) fell in no speech "
                     "segment (timeline.json 'unaligned')")
    return "; ".join(parts) or None
