"""``grok-voice`` and ``qwen-omni-realtime``: two dialects of the OpenAI Realtime protocol.

xAI's Grok Voice Agent API (``wss://api.x.ai/v1/realtime``) and Alibaba Cloud Model Studio's
Qwen-Omni-Realtime (``wss://dashscope-intl.aliyuncs.com/api-ws/v1/realtime``) both take a Bearer
key and ``?model=`` on the URL and speak OpenAI-style events, so the ``openai`` SDK's websocket
client carries them unchanged (``base_url`` points it at the provider). A dialect differs in
three places only, and each is a small piece of data here (docs/models.md cites the sources):

* the ``session.update`` payload (``session_config``): xAI nests audio formats under
  ``audio.input/output.format`` like GA but keeps ``voice`` and ``turn_detection`` at the top;
  DashScope uses the beta fields ``input_audio_format``/``output_audio_format``;
* the sample rates: xAI pcm at a configurable rate (24 kHz default), DashScope 16 kHz in and
  24 kHz out;
* server event names (``RENAMES``): DashScope's beta ``response.audio.delta`` and
  ``response.audio_transcript.delta`` are read as their GA names; xAI adds ``conversation.created``
  and ``ping``, which carry nothing the harness needs.

Neither provider has ``conversation.item.truncate``: after a barge-in the harness cuts playback
locally (pipelines/streaming_duplex.py) and ``truncate`` is a documented no-op, so the provider's history
keeps the whole answer. Each session keeps what the provider reports it used in ``usage``.

Keys come from ``XAI_API_KEY`` / ``DASHSCOPE_API_KEY`` only and live only inside the SDK client.
"""

from __future__ import annotations

import asyncio
import json
import os
import weakref
from dataclasses import dataclass
from typing import Any, ClassVar

from openai import AsyncOpenAI

from ..adapter import Adapter
from ..contract import DuplexModel, ModelError, SessionInfo
from ..model_options import ModelConfigError, build, check_transport, scrub
from ..streaming_contract import DEFAULT_CHUNK_MS, Error, Event
from .gpt_realtime import OpenAIRealtimeSession, configured, open_connection, setup_error

TURN_DETECTION = ("server_vad", "none")


@dataclass(frozen=True)
class DialectRealtime(DuplexModel):
    """What both dialects share. ``None`` for a VAD number means "not sent": the provider's
    own default applies (and is whatever its session.updated echoes back)."""

    model: str = ""
    voice: str | None = None
    instructions: str | None = None
    turn_detection: str = "server_vad"
    vad_threshold: float | None = None
    prefix_padding_ms: int | None = None
    silence_duration_ms: int | None = None
    base_url: str | None = None  # None: the provider's endpoint (DEFAULT_BASE_URL)
    allow_insecure: bool = False  # plain http/ws to a non-loopback host, key and all
    connect_timeout: float = 20.0
    chunk_ms: float = DEFAULT_CHUNK_MS

    LABEL: ClassVar[str] = ""
    KEY_ENV: ClassVar[str] = ""
    DEFAULT_BASE_URL: ClassVar[str] = ""
    RENAMES: ClassVar[dict[str, str]] = {}  # provider event name -> the GA name

    def __post_init__(self):
        if not os.environ.get(self.KEY_ENV):
            raise ModelConfigError(
                f"{self.LABEL}: no API key. Set the {self.KEY_ENV} environment variable (the "
                "key is read from the environment only, never from options or files).")
        if self.turn_detection not in TURN_DETECTION:
            raise ModelConfigError(f"{self.LABEL}: turn_detection must be one of "
                                   f"{', '.join(TURN_DETECTION)}, got {self.turn_detection!r}")
        if self.vad_threshold is not None and not 0.0 <= self.vad_threshold <= 1.0:
            raise ModelConfigError(f"{self.LABEL}: vad_threshold must be in [0, 1], "
                                   f"got {self.vad_threshold}")
        if self.chunk_ms <= 0 or self.connect_timeout <= 0:
            raise ModelConfigError(f"{self.LABEL}: chunk_ms and connect_timeout must be "
                                   "positive")
        check_transport(self.LABEL, self.url, key_env=self.KEY_ENV, carries_key=True,
                        allow_insecure=self.allow_insecure)

    @property
    def name(self) -> str:
        return self.model

    @property
    def url(self) -> str:
        return self.base_url or self.DEFAULT_BASE_URL

    def turn_detection_config(self) -> dict[str, Any] | None:
        if self.turn_detection == "none":
            return None
        td: dict[str, Any] = {"type": "server_vad"}
        for key, value in (("threshold", self.vad_threshold),
                           ("prefix_padding_ms", self.prefix_padding_ms),
                           ("silence_duration_ms", self.silence_duration_ms)):
            if value is not None:
                td[key] = value
        return td

    def session_config(self) -> dict[str, Any]:
        raise NotImplementedError

    async def connect(self, info: SessionInfo) -> "DialectSession":
        client = _client(self.url, self.KEY_ENV)
        conn = await open_connection(client, self.url, self.model, self.connect_timeout,
                                     self.KEY_ENV)
        return await configured(DialectSession(conn, self), self.session_config(),
                                self.connect_timeout, self.model)


@dataclass(frozen=True)
class GrokVoice(DialectRealtime):
    """xAI Grok Voice Agent API. pcm16 at ``sample_rate`` both ways (xAI: 8-48 kHz, default
    24 kHz)."""

    model: str = "grok-voice-latest"
    sample_rate: int = 24_000

    LABEL: ClassVar[str] = "grok-voice"
    KEY_ENV: ClassVar[str] = "XAI_API_KEY"
    DEFAULT_BASE_URL: ClassVar[str] = "https://api.x.ai/v1"
    RENAMES: ClassVar[dict[str, str]] = {}  # GA names already

    def __post_init__(self):
        super().__post_init__()
        if not 8_000 <= self.sample_rate <= 48_000:
            raise ModelConfigError(f"{self.LABEL}: sample_rate must be 8000-48000 Hz, "
                                   f"got {self.sample_rate}")

    @property
    def input_sample_rate(self) -> int:
        return self.sample_rate

    @property
    def output_sample_rate(self) -> int:
        return self.sample_rate

    def session_config(self) -> dict[str, Any]:
        pcm = {"type": "audio/pcm", "rate": self.sample_rate}
        config: dict[str, Any] = {"turn_detection": self.turn_detection_config(),
                                  "audio": {"input": {"format": pcm},
                                            "output": {"format": pcm}}}
        if self.voice is not None:
            config["voice"] = self.voice
        if self.instructions is not None:
            config["instructions"] = self.instructions
        return config


@dataclass(frozen=True)
class QwenOmniRealtime(DialectRealtime):
    """Alibaba Cloud Model Studio (DashScope) Qwen-Omni-Realtime. The format names and rates
    are data: newer DashScope pages name both formats plain ``pcm``."""

    model: str = "qwen3-omni-flash-realtime"
    input_audio_format: str = "pcm16"
    output_audio_format: str = "pcm24"
    input_rate: int = 16_000
    output_rate: int = 24_000

    LABEL: ClassVar[str] = "qwen-omni-realtime"
    KEY_ENV: ClassVar[str] = "DASHSCOPE_API_KEY"
    DEFAULT_BASE_URL: ClassVar[str] = "https://dashscope-intl.aliyuncs.com/api-ws/v1"
    RENAMES: ClassVar[dict[str, str]] = {
        "response.audio.delta": "response.output_audio.delta",
        "response.audio_transcript.delta": "response.output_audio_transcript.delta",
    }

    def __post_init__(self):
        super().__post_init__()
        if self.input_rate <= 0 or self.output_rate <= 0:
            raise ModelConfigError(f"{self.LABEL}: input_rate and output_rate must be "
                                   "positive")

    @property
    def input_sample_rate(self) -> int:
        return self.input_rate

    @property
    def output_sample_rate(self) -> int:
        return self.output_rate

    def session_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"modalities": ["text", "audio"],
                                  "input_audio_format": self.input_audio_format,
                                  "output_audio_format": self.output_audio_format,
                                  "turn_detection": self.turn_detection_config()}
        if self.voice is not None:
            config["voice"] = self.voice
        if self.instructions is not None:
            config["instructions"] = self.instructions
        return config


# One SDK client per event loop, endpoint and key (openai_realtime._CLIENTS says why).
_CLIENTS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict]" = \
    weakref.WeakKeyDictionary()


def _client(base_url: str, key_env: str) -> AsyncOpenAI:
    per_loop = _CLIENTS.setdefault(asyncio.get_running_loop(), {})
    key = os.environ.get(key_env) or ""
    slot = (base_url, key_env, hash(key))
    if slot not in per_loop:
        client = AsyncOpenAI(api_key=key, base_url=base_url, max_retries=0)
        # OPENAI_ORG_ID / OPENAI_PROJECT_ID are OpenAI's; never send them to another provider
        client.organization = None
        client.project = None
        per_loop[slot] = client
    return per_loop[slot]


class DialectSession(OpenAIRealtimeSession):
    """The GA session with the dialect's event names, no truncate, and usage kept."""

    def __init__(self, conn: Any, model: DialectRealtime):
        interrupt = model.turn_detection != "none"
        super().__init__(conn, interrupt, model.input_sample_rate, model.output_sample_rate)
        self._renames = model.RENAMES
        self._key_env = model.KEY_ENV

    async def configure(self, config: dict[str, Any]) -> None:
        """Our session.update straight away (both providers ask for it first), then wait
        for session.updated; hello events (session.created, conversation.created) and
        pings in between are skipped."""
        await self._conn.send_raw(json.dumps({"type": "session.update", "session": config}))
        while True:
            ev = await self._recv()
            if ev is None:
                raise ModelError("the session closed during setup")
            kind = ev.get("type")
            if kind == "session.updated":
                self.session = ev.get("session") or {}
                return
            if kind == "error":
                raise setup_error(ev.get("error") or {}, self._key_env)

    def _translate(self, ev: dict[str, Any]) -> Event | None:
        kind = ev.get("type")
        if kind in self._renames:
            ev = {**ev, "type": self._renames[kind]}
            kind = ev["type"]
        out = super()._translate(ev)
        if isinstance(out, Error):
            out = Error(scrub(out.message, self._key_env), out.code, out.fatal, out.transient)
        return out

    async def truncate(self, item_id: str, audio_end_ms: int) -> None:
        """Neither provider has conversation.item.truncate: playback was already cut
        locally, and the provider's history keeps the whole answer."""
        return None


def grok_voice(**options: Any) -> GrokVoice:
    """``--duplexact-model=grok-voice`` (docs/models.md)."""
    return build(GrokVoice, GrokVoice.LABEL, GrokVoice.KEY_ENV, options)


def qwen_omni_realtime(**options: Any) -> QwenOmniRealtime:
    """``--duplexact-model=qwen-omni-realtime`` (docs/models.md)."""
    return build(QwenOmniRealtime, QwenOmniRealtime.LABEL, QwenOmniRealtime.KEY_ENV, options)


# the registry's pre-run check: options, key and URL, without connecting
grok_voice = Adapter(grok_voice, preflight=grok_voice)
qwen_omni_realtime = Adapter(qwen_omni_realtime, preflight=qwen_omni_realtime)
