"""The duplexact bridge protocol v1 on the wire (docs/bridge-protocol.md): message kinds,
framing, the READY payload and float32 PCM. Shared by the kit's server and the plugin's
client, so both sides read one definition. Imports only the standard library and numpy.

Every message is one binary WebSocket message: ``[kind byte][payload]``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

PROTOCOL = "duplexact-bridge"
VERSION = 1

READY, AUDIO, TEXT, ERROR, CLOSE, PING, PONG = 0, 1, 2, 5, 6, 7, 8
KIND_NAMES = {READY: "READY", AUDIO: "AUDIO", TEXT: "TEXT", 3: "SEQ_TRACE", 4: "SEQ_DELTA",
              ERROR: "ERROR", CLOSE: "CLOSE", PING: "PING", PONG: "PONG"}
MODES = ("stepped", "streaming")
MAX_MESSAGE = 1 << 24  # 16 MiB: minutes of float32 audio; a frame is a few KiB
# Bounds on what a server chooses, so no READY or answer can make the client allocate without
# limit (docs/bridge-protocol.md §3, §4): the rate of any real audio, a frame that fits one
# message, the text of one step (stepped) or before one AUDIO (streaming).
MIN_RATE, MAX_RATE = 8_000, 192_000
MAX_FRAME = (MAX_MESSAGE - 1) // 4  # float32 samples after the kind byte
MAX_TEXT = 1 << 16  # 64 KiB of TEXT per step: a model's words in one frame are a few bytes
# The client's wait for one stepped answer (its ``step_timeout``), and the kit's default wait
# for the client's next message (``--input-timeout``): one figure, since a lockstep client that
# sent nothing for this long has given up itself, and a silent one must not hold a slot longer.
STEP_TIMEOUT_S = 30.0
# Streaming: audio a server may send ahead of real time (memory), and messages per second (a
# model sends tens; a flood would starve the loop every session's timing shares).
MAX_AHEAD_S = 120.0
MAX_EVENTS_PER_S = 1000

# Query parameters the client adds to every connection; never handed to a model as options.
TRIAL_PARAM = "trial_id"  # the benchmark instance, for the server's log line
SEED_PARAM = "run_seed"  # the run's seed (SessionInfo.seed): a model seeds its sampling from it
RESERVED_PARAMS = (TRIAL_PARAM, SEED_PARAM)

# What an empty READY means: Raon-SpeechChat's gateway (proto/config.py).
RAON_RATE, RAON_FRAME = 24_000, 1_920


class ProtocolError(ValueError):
    """A message that breaks the wire format (says which rule)."""


def frame(kind: int, payload: bytes = b"") -> bytes:
    return bytes((kind,)) + payload


def split(message: bytes | str) -> tuple[int, bytes]:
    """``(kind, payload)`` of one message; a text (non-binary) message is a protocol error."""
    if isinstance(message, str):
        raise ProtocolError("got a text WebSocket message; every bridge message is binary")
    if not message:
        raise ProtocolError("got an empty message (no kind byte)")
    return message[0], bytes(message[1:])


def kind_name(kind: int) -> str:
    return KIND_NAMES.get(kind, f"kind {kind}")


# --- audio ----------------------------------------------------------------------------------

def audio(samples: np.ndarray) -> bytes:
    """An AUDIO message: float32 little-endian mono."""
    return frame(AUDIO, np.asarray(samples, dtype="<f4").reshape(-1).tobytes())


def pcm(payload: bytes) -> np.ndarray:
    """An AUDIO payload as a float32 array (a writable copy in native byte order)."""
    if len(payload) % 4:
        raise ProtocolError(f"AUDIO payload of {len(payload)} bytes is not whole float32 "
                            "samples (a multiple of 4 bytes)")
    return np.frombuffer(payload, dtype="<f4").astype(np.float32)


def text(s: str) -> bytes:
    return frame(TEXT, s.encode("utf-8"))


def error(message: str) -> bytes:
    return frame(ERROR, message.encode("utf-8", "replace"))


def utf8(payload: bytes) -> str:
    return payload.decode("utf-8", "replace")


# --- READY ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Ready:
    """The first message of a connection: how this server's model runs."""

    mode: str
    sample_rate: int
    frame: int  # samples per step (stepped); the AUDIO size the server expects (streaming)
    transcript: bool  # TEXT messages carry the model's own words
    model: str = ""
    native: bool = False  # an empty READY (Raon's gateway), not a duplexact bridge
    max_sessions: int | None = None  # trials the server runs at once (None: it did not say)

    def __post_init__(self):
        if self.mode not in MODES:
            raise ProtocolError(f"READY mode must be one of {', '.join(MODES)}, got "
                                f"{self.mode!r}")
        for name in ("sample_rate", "frame", "max_sessions"):
            v = getattr(self, name)
            if v is None and name == "max_sessions":  # optional (absent: unknown)
                continue
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ProtocolError(f"READY {name} must be a positive integer, got {v!r}")
        if not MIN_RATE <= self.sample_rate <= MAX_RATE:
            raise ProtocolError(f"READY sample_rate {self.sample_rate} Hz is outside the "
                                f"bound of {MIN_RATE}-{MAX_RATE} Hz")
        if self.frame > MAX_FRAME:
            raise ProtocolError(f"READY frame of {self.frame} samples is over the bound of "
                                f"{MAX_FRAME} (one {MAX_MESSAGE}-byte message)")

    @property
    def frame_s(self) -> float:
        return self.frame / self.sample_rate

    def payload(self) -> bytes:
        data = {"protocol": PROTOCOL, "version": VERSION, "mode": self.mode,
                "sample_rate": self.sample_rate, "frame": self.frame,
                "transcript": self.transcript, "model": self.model}
        if self.max_sessions is not None:
            data["max_sessions"] = self.max_sessions
        return json.dumps(data).encode()

    def message(self) -> bytes:
        return frame(READY, self.payload())


def parse_ready(payload: bytes) -> Ready:
    """A READY payload; empty means Raon's gateway (streaming, 24 kHz, 1920-sample frames,
    TEXT deltas)."""
    if not payload:
        return Ready("streaming", RAON_RATE, RAON_FRAME, True, "raon-speechchat", native=True)
    try:
        data: Any = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ProtocolError(f"READY payload is not UTF-8 JSON: {e}") from None
    if not isinstance(data, dict):
        raise ProtocolError("READY payload must be a JSON object")
    if data.get("protocol") != PROTOCOL:
        raise ProtocolError(f"READY protocol must be {PROTOCOL!r}, got "
                            f"{data.get('protocol')!r}")
    if data.get("version") != VERSION:
        raise ProtocolError(f"READY version {data.get('version')!r}: this client speaks "
                            f"version {VERSION}")
    missing = [k for k in ("mode", "sample_rate", "frame") if k not in data]
    if missing:
        raise ProtocolError(f"READY lacks {', '.join(missing)}")
    transcript = data.get("transcript", False)
    if not isinstance(transcript, bool):
        raise ProtocolError(f"READY transcript must be true or false, got {transcript!r}")
    return Ready(data["mode"], data["sample_rate"], data["frame"], transcript,
                 str(data.get("model") or ""), max_sessions=data.get("max_sessions"))


def frame_problem(samples: np.ndarray, expected: int) -> str | None:
    """Why a stepped AUDIO frame is not one usable frame (None when it is)."""
    if samples.shape != (expected,):
        return f"{samples.size} samples, expected exactly {expected}"
    if not all(math.isfinite(x) for x in (float(samples.min(initial=0.0)),
                                          float(samples.max(initial=0.0)))):
        return "samples that are not finite (NaN or inf)"
    return None
