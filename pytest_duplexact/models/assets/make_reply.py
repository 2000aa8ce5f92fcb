"""Regenerate response.flac / response.json, the ``endpoint`` model's spoken reply.

Run once by hand (``python pytest_duplexact/models/assets/make_reply.py``); the outputs are
committed. espeak-ng's library reports where each word starts in the audio (a WORD event);
a word ends where its speech energy ends before the next word. Needs the Debian package
espeak-ng (libespeak-ng.so.1)."""

from __future__ import annotations

import ctypes
import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
TEXT = "Okay, thanks for telling me. Let me help you with that."
VOICE = b"en-us"
RATE_WPM = 165


class _Event(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("unique_identifier", ctypes.c_uint),
                ("text_position", ctypes.c_int), ("length", ctypes.c_int),
                ("audio_position", ctypes.c_int), ("sample", ctypes.c_int),
                ("user_data", ctypes.c_void_p), ("id", ctypes.c_char * 8)]


_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int,
                             ctypes.POINTER(_Event))
_EVENT_LIST_TERMINATED, _EVENT_WORD = 0, 1
_AUDIO_OUTPUT_SYNCHRONOUS, _POS_CHARACTER, _CHARS_UTF8 = 2, 1, 1


def synthesize(text: str) -> tuple[np.ndarray, int, list[tuple[float, int, int]]]:
    """(samples, sample rate, [(word start s, text position, length)])."""
    lib = ctypes.CDLL("libespeak-ng.so.1")
    rate = lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 0, None, 0)
    if rate <= 0:
        raise RuntimeError("espeak_Initialize failed")
    lib.espeak_SetVoiceByName(VOICE)
    lib.espeak_SetParameter(1, RATE_WPM, 0)  # espeakRATE
    chunks, words = [], []

    def on_audio(wav, n, events):
        if wav and n > 0:
            chunks.append(np.ctypeslib.as_array(wav, shape=(n,)).copy())
        i = 0
        while events[i].type != _EVENT_LIST_TERMINATED:
            e = events[i]
            if e.type == _EVENT_WORD:
                words.append((e.audio_position / 1000.0, e.text_position, e.length))
            i += 1
        return 0

    cb = _CALLBACK(on_audio)
    lib.espeak_SetSynthCallback(cb)
    data = text.encode("utf-8")
    lib.espeak_Synth(data, len(data) + 1, 0, _POS_CHARACTER, 0, _CHARS_UTF8, None, None)
    lib.espeak_Synchronize()
    return np.concatenate(chunks).astype(np.float32) / 32768.0, rate, words


def main() -> None:
    from pytest_duplexact.data import audio
    from pytest_duplexact.listen.activity import FRAME_S, ON_DB, frame_db

    samples, rate, marks = synthesize(TEXT)
    samples = audio.resample(samples, rate, audio.SAMPLE_RATE)
    frame = int(FRAME_S * audio.SAMPLE_RATE)
    loud = [frame_db(samples[i: i + frame]) >= ON_DB for i in range(0, len(samples), frame)]
    total = len(samples) / audio.SAMPLE_RATE
    words = []
    for k, (start, pos, length) in enumerate(marks):
        nxt = marks[k + 1][0] if k + 1 < len(marks) else total
        # the word ends with its last loud frame before the next word's onset (whose event
        # comes a frame or two after its first sound)
        first, last = int(start / FRAME_S), max(int(start / FRAME_S) + 1, int(nxt / FRAME_S) - 2)
        loud_frames = [i for i in range(first, min(last, len(loud))) if loud[i]]
        end = min((loud_frames[-1] + 1) * FRAME_S, nxt) if loud_frames else nxt
        token = TEXT.encode("utf-8")[pos - 1: pos - 1 + length].decode("utf-8")
        words.append({"start": round(start, 3), "end": round(end, 3), "text": token})
    audio.write(HERE / "response.flac", samples)
    meta = {"text": TEXT, "words": words, "generator": f"espeak-ng voice {VOICE.decode()} "
            f"{RATE_WPM} wpm, resampled to 16 kHz"}
    (HERE / "response.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(meta, indent=1), f"{total:.2f} s")


if __name__ == "__main__":
    main()
