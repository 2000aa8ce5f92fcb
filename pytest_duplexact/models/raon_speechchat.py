"""``--duplexact-model=raon-speechchat``: Raon-SpeechChat behind its own demo gateway, spoken
to natively (no bridge): the duplexact bridge protocol is Raon's framing.

Read from krafton-ai/Raon-SpeechChat-Demo: ``proto/messages.py`` (``[kind byte][payload]``:
0 READY with an empty payload, 1 AUDIO float32 PCM, 2 TEXT delta, 3/4 sequence traces, 5
ERROR, 6 CLOSE with a reason, 7 PING / 8 PONG), ``proto/config.py`` (24 kHz, 1920-sample
frames, the sampling defaults below), ``gateway/server.py`` (``/ws/chat``; the session's
settings are query parameters) and ``worker/session.py`` (per input frame: traces, the TEXT
delta, then one AUDIO frame). The gateway PINGs every 30 s and drops a client that does not
PONG; the client answers. ``docker compose up`` serves it at ``wss://HOST:8082`` with a
self-signed certificate: pass ``ca_file=`` its PEM (or a trusted certificate's URL).

Errors: the worker sends ERROR for a failed decode step (it fills that frame with silence)
and for a session it cannot start ("no workers available"), and CLOSE with a reason
(``overloaded_backlog``, ``worker_unhealthy``, ``idle_timeout``): each leaves the trial with a
hole or without a session, so each is a transient failure and the trial is run again.

Transcript: the TEXT deltas are the model's own words, timed by the audio frame they come
with. The paper used them instead of whisper-1 for this model (App. D.1), so
``native_transcript`` defaults to true; false ignores them and the run's transcriber hears
the audio instead.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..bridges import wire
from .bridge import BridgeClient, BridgeStreaming, probe
from .model_options import ModelConfigError, build
from .streaming import DEFAULT_CHUNK_MS

LABEL = "raon-speechchat"
KEY_ENV = "RAON_SPEECHCHAT_API_KEY"  # only for a gateway behind an authenticating proxy
PATH = "/ws/chat"
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
        self.client()  # the URL, key and timeout checks

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
                            server_options=self.query(), label=LABEL, key_env=KEY_ENV)


def factory(**options: Any) -> BridgeStreaming:
    """``--duplexact-model=raon-speechchat``: no probe (its READY is known, and a probe would
    reserve a GPU worker for nothing)."""
    raon = build(RaonSpeechChat, LABEL, KEY_ENV, options)
    # the gateway's empty READY, with the transcript as the options say
    ready = replace(wire.parse_ready(b""), transcript=raon.native_transcript)
    return BridgeStreaming(raon.client(), ready, error_is_transient=True)


def preflight(**options: Any) -> None:
    build(RaonSpeechChat, LABEL, KEY_ENV, options)


def reach(**options: Any) -> str:
    """``duplexact models raon-speechchat -o url=...``: whether the gateway opens a session
    now (it reserves a worker for a moment)."""
    r = probe(build(RaonSpeechChat, LABEL, KEY_ENV, options).client())
    return "an empty READY (Raon's gateway)" if r.native else f"a bridge READY ({r.model})"


factory.preflight = preflight  # type: ignore[attr-defined]
factory.reach = reach  # type: ignore[attr-defined]
