"""``fbank`` with kaldi's framing (25 ms windows every 10 ms, snip_edges) and, in place of
the mel energies, each frame's log RMS (input in int16 units, as web/vad.py passes it) in
every bin: all the stub state head reads."""

from __future__ import annotations


def fbank(waveform, frame_length=25.0, frame_shift=10.0, num_mel_bins=23,
          sample_frequency=16000.0, **_):
    x = waveform.reshape(-1).double() / 32768.0
    size = int(sample_frequency * frame_length / 1000)
    shift = int(sample_frequency * frame_shift / 1000)
    n = 1 + (len(x) - size) // shift
    frames = x[: (n - 1) * shift + size].unfold(0, size, shift)
    rms = frames.pow(2).mean(dim=1).sqrt().clamp_min(1e-10)
    return rms.log().float().unsqueeze(1).repeat(1, num_mel_bins)
