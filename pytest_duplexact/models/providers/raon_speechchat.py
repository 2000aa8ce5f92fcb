"""``--duplexact-model=raon-speechchat``: Raon-SpeechChat behind its own demo gateway, spoken
to natively (no bridge): the duplexact bridge protocol is Raon's framing.

Read from krafton-ai/Raon-SpeechChat-Demo: ``proto/messages.py`` (``[kind byte][payload]``:
0 READY with an empty payload, 1 AUDIO float32 PCM, 2 TEXT delta, 3/4 sequence traces, 5
ERROR, 6 CLOSE with a reason, 7 PING / 8 PONG), ``proto/config.py`` (24 kHz, 1920-sample
frames, the sampling defaults below), ``gateway/server.py`` (``/ws/chat``; the session's
settings are query parameters) and ``worker/session.py`` (per input frame: traces, the TEXT
delta, then one AUDIO frame). The gateway PINGs every 30 s and drops a client that does not
PONG; the client answers. ``docker compose up`` serves it at ``wss://HOST:8082`` with a
self-signed certificate made by ``scripts/entrypoint_gateway.sh`` whose only name is
``CN=raon-speechchat-demo`` (no subjectAltName): pass ``ca_file=`` its PEM and
``server_name=raon-speechchat-demo`` (the name to check it against), or ``verify=false``.

Busy: the gateway refuses a session at once with ERROR "no workers available" when every
worker holds its ``FD_MAX_SESSIONS_PER_GPU`` sessions (``gateway/server.py``; compose: 2 per
GPU). The client waits that out, reconnecting with back-off, until ``ready_timeout``; and it
runs at most ``max_sessions`` trials at once (the gateway's capacity: GPUs x sessions per GPU).

Errors: the worker sends ERROR for a failed decode step (it fills that frame with silence),
and CLOSE with a reason (``overloaded_backlog``, ``worker_unhealthy``, ``idle_timeout``): each
leaves the trial with a hole, so each is a transient failure and the trial is run again.

Transcript: the TEXT deltas are the model's own words, timed by the audio frame they come
with. The paper used them instead of whisper-1 for this model (App. D.1), so
``native_transcript`` defaults to true; false ignores them and the run's transcriber hears
the audio instead.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ...bridges import wire
from ..adapter import Adapter
from ..contract import SessionInfo
from ..model_options import ModelConfigError, build, require_positive
from ..streaming_contract import DEFAULT_CHUNK_MS, TransientModelError, admitting
from .bridge import BridgeClient, BridgeStreaming, BridgeStreamingSession, probe

LABEL = "raon-speechchat"
KEY_ENV = "RAON_SPEECHCHAT_API_KEY"  # only for a gateway behind an authenticating proxy
PATH = "/ws/chat"
NO_WORKERS = "no workers available"  # gateway/server.py: every worker is full
BACKOFF_S = (0.5, 5.0)  # the first wait for a free worker, the longest
# query parameters the gateway reads (gateway/server.py), sent only when set
_QUERY = ("prompt", "prompt_language", "system_prompt_style", "system_prompt_persona",
          "system_prompt_context", "custom_system_prompt", "temperature", "top_k", "top_p",
          "eos_penalty", "bc_penalty", "repetition_penalty", "speaker_mode", "speaker_key")


@dataclass(frozen=True)
class RaonSpeechChat:
    """Options (``--duplexact-model-option``). Sampling defaults are the gateway's
    (proto/config.py ``SamplingConfig``, gateway/server.py)."""

    url: str = ""                    # e.g. wss://gpu-box:8082 (path /ws/chat by default)
    prompt: str = "eng:full_duplex:listen-first"
    prompt_language: str | None = None
    system_prompt_style: str | None = None  # generic, raon, raon_persona, ..., custom
    system_prompt_persona: str | None = None
    system_prompt_context: str | None = None
    custom_system_prompt: str | None = None
    temperature: float = 0.7
    top_k: int = 50
    top_p: float = 0.8
    eos_penalty: float = 0.0
    bc_penalty: float = 0.0
    repetition_penalty: float = 1.0
    speaker_mode: str | None = None  # none, default, recorded
    speaker_key: str | None = None
    native_transcript: bool = True   # the paper's choice (App. D.1)
    ca_file: str = ""
    server_name: str = ""            # the certificate's name (the demo's: raon-speechchat-demo)
    verify: bool = True
    max_sessions: int = 2            # trials at once: GPUs x FD_MAX_SESSIONS_PER_GPU (2)
    allow_insecure: bool = False
    connect_timeout: float = 20.0
    ready_timeout: float = 120.0     # reserving a worker, creating the session
    close_timeout: float = 5.0
    chunk_ms: float = DEFAULT_CHUNK_MS

    def __post_init__(self):
        if not self.url:
            raise ModelConfigError(
                f"{LABEL}: no gateway. Start Raon-SpeechChat-Demo (docker compose up) and pass "
                "--duplexact-model-option url=wss://HOST:8082 (docs/models.md)")
        require_positive(LABEL, self, "max_sessions")
        self.client()  # the URL, key, TLS and timeout checks

    def endpoint(self) -> str:
        parts = urlsplit(self.url)
        scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
        path = parts.path if parts.path not in ("", "/") else PATH
        return urlunsplit((scheme, parts.netloc, path, parts.query, ""))

    def query(self) -> dict[str, str]:
        return {k: str(getattr(self, k)) for k in _QUERY if getattr(self, k) is not None}

    def client(self) -> BridgeClient:
        return BridgeClient(url=self.endpoint(), allow_insecure=self.allow_insecure,
                            connect_timeout=self.connect_timeout,
                            ready_timeout=self.ready_timeout, close_timeout=self.close_timeout,
                            chunk_ms=self.chunk_ms, ca_file=self.ca_file,
                            server_name=self.server_name, verify=self.verify,
                            server_options=self.query(), label=LABEL, key_env=KEY_ENV)


class RaonStreaming(BridgeStreaming):
    """The gateway as a streaming model: at most ``max_sessions`` trials at once, and a
    "no workers available" refusal waited out until ``ready_timeout``."""

    def __init__(self, client: BridgeClient, ready: wire.Ready, max_sessions: int):
        super().__init__(client, ready, error_is_transient=True)
        self.max_concurrency = max_sessions  # read by run/harness.py

    async def connect(self, info: SessionInfo) -> BridgeStreamingSession:
        with admitting():  # waiting for a free worker is the gateway's time, not the model's
            return await self._admitted(info)

    async def _admitted(self, info: SessionInfo) -> BridgeStreamingSession:
        c = self.client
        end = time.monotonic() + c.ready_timeout
        wait, longest = BACKOFF_S
        while True:
            try:
                return await super().connect(info)
            except TransientModelError as e:
                if NO_WORKERS not in str(e):
                    raise
                if time.monotonic() + wait > end:
                    raise TransientModelError(
                        f"{LABEL}: no worker free within {c.ready_timeout:g} s (ready_timeout;"
                        f" the gateway kept answering \"{NO_WORKERS}\"): run at most "
                        "max_sessions trials at once (GPUs x FD_MAX_SESSIONS_PER_GPU)") from None
            await asyncio.sleep(wait)
            wait = min(wait * 2, longest)


def factory(**options: Any) -> BridgeStreaming:
    """``--duplexact-model=raon-speechchat``: no probe (its READY is known, and a probe would
    reserve a GPU worker for nothing)."""
    raon = build(RaonSpeechChat, LABEL, KEY_ENV, options)
    # the gateway's empty READY, with the transcript as the options say
    ready = replace(wire.parse_ready(b""), transcript=raon.native_transcript)
    return RaonStreaming(raon.client(), ready, raon.max_sessions)


def preflight(**options: Any) -> None:
    build(RaonSpeechChat, LABEL, KEY_ENV, options)


def reach(**options: Any) -> str:
    """``duplexact models raon-speechchat -o url=...``: whether the gateway opens a session
    now (it reserves a worker for a moment)."""
    r = probe(build(RaonSpeechChat, LABEL, KEY_ENV, options).client())
    return "an empty READY (Raon's gateway)" if r.native else f"a bridge READY ({r.model})"


factory = Adapter(factory, preflight=preflight, reach=reach)
