"""``--duplexact-model=gemini-live``: the Gemini Live API as a ``StreamingModel``.

Speaks the BidiGenerateContent websocket through the ``google-genai`` SDK
(``Client().aio.live.connect(model=..., config=...)``, entered by hand in ``connect`` and left
in ``close``): pcm16 at 16 kHz in (``audio/pcm;rate=16000``), 24 kHz out, the model's output
audio transcription as the native transcript. The provider's automatic activity detection
decides when the model answers; a barge-in is ``serverContent.interrupted``, after which the
harness cuts local playback. The Live API has no item ids and no truncate call: each model turn
is numbered here, and ``truncate`` is a no-op (the server already discarded the rest of the
turn when it sent ``interrupted``). Timing, playback and transcript alignment live in
``pipelines/streaming_duplex.py`` (docs/models.md, docs/realtime.md).

The API key is read from ``GEMINI_API_KEY`` / ``GOOGLE_API_KEY`` only, by the SDK client,
which sends it in the ``x-goog-api-key`` handshake header (never in the URL). This module
never holds, logs or repeats it. ``google-genai`` is an optional extra
(``pip install 'pytest-duplexact[gemini]'``), imported only when this model is built.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import logging
import os
import re
from dataclasses import dataclass
from typing import Any, AsyncIterator
from urllib.parse import urlsplit

import numpy as np

from ...remote.netsafety import insecure_url_problem
from ..adapter import Adapter
from ..contract import DuplexModel, ModelError, SessionInfo
from ..model_options import (  # also read as gemini_live.ModelConfigError
    TRANSIENT_HTTP,
    ModelConfigError,
    coerce,
    connect_error,
    scrub,
)
from ..streaming_contract import (
    DEFAULT_CHUNK_MS,
    AudioDelta,
    Error,
    Event,
    ItemDone,
    ResponseDone,
    SpeechStarted,
    TranscriptDelta,
    TransientModelError,
)
from ..util.pcm import from_pcm16, pcm16

log = logging.getLogger(__name__)

NAME = "gemini-live"
IN_RATE = 16_000   # the Live API's native input rate (audio/pcm;rate=16000)
OUT_RATE = 24_000  # the Live API always answers in 24 kHz pcm16
IN_MIME = f"audio/pcm;rate={IN_RATE}"
KEY_VARS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
SENSITIVITY = ("high", "low")
CLOSE_TIMEOUT_S = 5.0
SEND_TIMEOUT_S = 10.0
# Websocket close codes the service uses for a passing condition: going away / abnormal
# closure / internal error (incl. RESOURCE_EXHAUSTED) / service restart / try again later.
_TRANSIENT_CLOSE = {1001, 1006, 1011, 1012, 1013, 1014}
_TRANSIENT_WORDS = re.compile(r"RESOURCE_EXHAUSTED|UNAVAILABLE|DEADLINE_EXCEEDED|quota|"
                              r"rate limit|overloaded|try again", re.IGNORECASE)


def _has_key() -> bool:
    return any(os.environ.get(v) for v in KEY_VARS)


def _import_sdk() -> None:
    missing = importlib.util.find_spec("google") is None or \
        importlib.util.find_spec("google.genai") is None
    if not missing:
        try:
            importlib.import_module("google.genai")
        except ImportError as e:
            raise ModelConfigError(f"{NAME}: the google-genai package does not import "
                                   f"({e}); reinstall it with pip install "
                                   "'pytest-duplexact[gemini]'.") from None
        return
    raise ModelConfigError(f"{NAME}: the google-genai package is not installed. Install it "
                           "with pip install 'pytest-duplexact[gemini]'.")


@dataclass(frozen=True)
class GeminiLive(DuplexModel):
    """Options (all settable as ``--duplexact-model-option``-style strings).

    Activity detection is the provider's automatic one; its sensitivities and windows are
    sent only when set, so an unset option means the provider's own default (and the setup
    sent is what a run records). With ``automatic_activity_detection=false`` the model never
    answers on its own: the harness sends no manual activity signals."""

    model: str = "gemini-3.1-flash-live-preview"
    voice: str = "Puck"
    system_instruction: str | None = None  # None: the provider's default behaviour
    temperature: float | None = None       # None: the provider's default
    automatic_activity_detection: bool = True
    start_sensitivity: str | None = None   # "high" / "low"; None = provider default
    end_sensitivity: str | None = None
    prefix_padding_ms: int | None = None
    silence_duration_ms: int | None = None
    interrupt_response: bool = True        # START_OF_ACTIVITY_INTERRUPTS vs NO_INTERRUPTION
    base_url: str | None = None            # None: the SDK default (generativelanguage API)
    api_version: str = "v1beta"
    connect_timeout: float = 20.0
    chunk_ms: float = DEFAULT_CHUNK_MS

    input_sample_rate = IN_RATE
    output_sample_rate = OUT_RATE

    def __post_init__(self):
        _import_sdk()  # here, not on the event loop: the import takes ~1.5 s of CPU
        if not _has_key():
            raise ModelConfigError(
                f"{NAME}: no Gemini API key. Set the GEMINI_API_KEY (or GOOGLE_API_KEY) "
                "environment variable (the key is read from the environment only, never from "
                "options or files).")
        for name in ("start_sensitivity", "end_sensitivity"):
            if getattr(self, name) not in (None, *SENSITIVITY):
                raise ModelConfigError(f"{NAME}: {name} must be high, low or none, got "
                                       f"{getattr(self, name)!r}")
        if self.temperature is not None and not 0.0 <= self.temperature <= 2.0:
            raise ModelConfigError(f"{NAME}: temperature must be in [0, 2], "
                                   f"got {self.temperature}")
        for name in ("prefix_padding_ms", "silence_duration_ms"):
            if getattr(self, name) is not None and getattr(self, name) < 0:
                raise ModelConfigError(f"{NAME}: {name} must not be negative")
        if self.chunk_ms <= 0 or self.connect_timeout <= 0:
            raise ModelConfigError(f"{NAME}: chunk_ms and connect_timeout must be positive")
        if not re.fullmatch(r"v\d+\w*", self.api_version):
            raise ModelConfigError(f"{NAME}: api_version must look like v1beta or v1alpha, "
                                   f"got {self.api_version!r}")
        if self.base_url is not None:
            url = urlsplit(self.base_url)
            if url.scheme not in ("https", "wss", "http", "ws") or not url.hostname:
                raise ModelConfigError(f"{NAME}: base_url must be an https:// URL, got "
                                       f"{self.base_url!r}")
            # the key travels in a header: never offer it to a plain-text endpoint elsewhere
            problem = insecure_url_problem(self.base_url, f"{NAME}: base_url")
            if problem:
                raise ModelConfigError(problem)

    @property
    def name(self) -> str:
        return self.model

    def live_config(self) -> dict[str, Any]:
        """The ``LiveConnectConfig`` (as the SDK's dict form) sent in the setup message."""
        detection: dict[str, Any] = {"disabled": not self.automatic_activity_detection}
        if self.start_sensitivity:
            detection["start_of_speech_sensitivity"] = \
                f"START_SENSITIVITY_{self.start_sensitivity.upper()}"
        if self.end_sensitivity:
            detection["end_of_speech_sensitivity"] = \
                f"END_SENSITIVITY_{self.end_sensitivity.upper()}"
        if self.prefix_padding_ms is not None:
            detection["prefix_padding_ms"] = self.prefix_padding_ms
        if self.silence_duration_ms is not None:
            detection["silence_duration_ms"] = self.silence_duration_ms
        config: dict[str, Any] = {
            "response_modalities": ["AUDIO"],
            "speech_config": {"voice_config": {"prebuilt_voice_config":
                                               {"voice_name": self.voice}}},
            "output_audio_transcription": {},
            "realtime_input_config": {
                "automatic_activity_detection": detection,
                "activity_handling": ("START_OF_ACTIVITY_INTERRUPTS" if self.interrupt_response
                                      else "NO_INTERRUPTION"),
            },
        }
        if self.system_instruction is not None:
            config["system_instruction"] = self.system_instruction
        if self.temperature is not None:
            config["temperature"] = self.temperature
        return config

    async def connect(self, info: SessionInfo) -> "GeminiLiveSession":
        client = _client(self.base_url, self.api_version)
        manager = client.aio.live.connect(model=self.model, config=self.live_config())
        try:
            # the SDK sends the setup and waits for setupComplete inside __aenter__
            session = await asyncio.wait_for(manager.__aenter__(), self.connect_timeout)
        except asyncio.TimeoutError:
            raise TransientModelError(f"{self.model}: no setupComplete within "
                                      f"{self.connect_timeout:g}s") from None
        except Exception as e:
            raise _connect_error(e, self.model) from None
        live = GeminiLiveSession(manager, session, self.model)
        if session.setup_complete is None:  # the server answered the setup with something else
            await live.close()
            raise ModelError(f"{self.model}: the server did not confirm the session setup")
        return live


# Building a genai Client builds its HTTP clients and SSL contexts: 140-370 ms of CPU here, on
# the event loop that also paces every other session's input. So one is made per endpoint and
# shared by every session of the process. That is safe across event loops because the live
# path uses only the client's settings and its SSL context (each connect opens its own
# websocket), never its loop-bound HTTP clients.
_CLIENTS: dict[tuple, Any] = {}


def _client(base_url: str | None, api_version: str):
    """The SDK client; the SDK reads the key (and SSL_CERT_FILE) itself. Keyed by a hash of
    the key, so a changed environment gets a fresh client."""
    from google import genai
    from google.genai import types

    key = (base_url, api_version, os.environ.get("SSL_CERT_FILE"),
           hash(tuple(os.environ.get(v) for v in KEY_VARS)))
    if key not in _CLIENTS:
        options = types.HttpOptions(base_url=base_url, api_version=api_version)
        _CLIENTS[key] = genai.Client(vertexai=False, http_options=options)
    return _CLIENTS[key]


def _api_error(e: BaseException, model: str) -> ModelError | None:
    """A google-genai APIError (raised for a close frame or an error payload), or the
    websockets close that a send runs into, as a ModelError; None when ``e`` is neither."""
    from google.genai import errors
    from websockets.exceptions import ConnectionClosed

    if isinstance(e, ConnectionClosed) and e.rcvd is not None:
        return _classify(e.rcvd.code, scrub(e.rcvd.reason, *KEY_VARS), model)
    if not isinstance(e, errors.APIError):
        return None
    details = e.details if isinstance(e.details, str) else ""  # a close frame's reason
    return _classify(e.code, scrub(e.message or e.status or details, *KEY_VARS), model)


def _classify(code: int | None, why: str, model: str) -> ModelError:
    """Close codes and HTTP-style codes: a bad key or request is final, a busy or restarting
    service is worth a retry of the whole instance."""
    if code in (401, 403) or re.search(r"API key", why, re.IGNORECASE):
        return ModelConfigError(f"{model}: the service rejected the API key ({code}: {why}); "
                                f"check {' / '.join(KEY_VARS)}")
    if code in _TRANSIENT_CLOSE or code in TRANSIENT_HTTP or _TRANSIENT_WORDS.search(why):
        return TransientModelError(f"{model}: the service closed the session ({code}: {why})")
    if code == 1000:
        return TransientModelError(f"{model}: the service ended the session mid-instance")
    return ModelError(f"{model}: the service refused the session ({code}: {why})")


def _connect_error(e: BaseException, model: str) -> ModelError:
    """A google-genai or websockets failure at the handshake, as a ModelError."""
    return _api_error(e, model) or connect_error(
        e, model, KEY_VARS,
        not_found="the Live API endpoint: unknown model, API version or base URL")


def _seconds(duration: str | None) -> str:
    return duration if duration else "unknown"


class GeminiLiveSession:
    """One live BidiGenerateContent websocket: the ``StreamingSession`` protocol over the SDK.

    ``usage`` sums the ``usageMetadata`` the service reports (once per model turn, the turn's
    prompt and response tokens) plus the audio sent and received, in seconds."""

    def __init__(self, manager: Any, session: Any, model: str):
        from google.genai import types

        self._blob = types.Blob  # looked up once: send() runs every 20 ms per session
        self._manager = manager
        self._session = session
        self._model = model
        self._closed = False
        self._turn = 0        # numbers the model's turns: the Live API has no item ids
        self._turn_has_output = False
        self.usage: dict[str, int | float] = {"sessions": 1, "input_audio_s": 0.0,
                                              "output_audio_s": 0.0}

    @property
    def _item(self) -> str:
        return f"turn_{self._turn}"

    def _next_turn(self) -> None:
        if self._turn_has_output:
            self._turn += 1
            self._turn_has_output = False

    def _count(self, key: str, value: int | float | None) -> None:
        if value:
            self.usage[key] = self.usage.get(key, 0) + value

    async def send(self, pcm: np.ndarray) -> None:
        # The hot path: ~30 us of SDK validation per call, cheap enough to keep the public API.
        data = pcm16(pcm)
        try:
            # a server that stops reading would block the send once the socket buffers fill
            async with asyncio.timeout(SEND_TIMEOUT_S):
                await self._session.send_realtime_input(
                    audio=self._blob(data=data, mime_type=IN_MIME))
        except TimeoutError:
            raise TransientModelError(f"{self._model}: sending input stalled for "
                                      f"{SEND_TIMEOUT_S:g}s") from None
        except Exception as e:
            if self._closed:
                return
            raise self._failure(e) from None
        self.usage["input_audio_s"] += len(data) / 2 / IN_RATE

    def _failure(self, e: BaseException) -> ModelError:
        err = _api_error(e, self._model)
        if err is not None:
            return err
        if "websockets" in type(e).__module__ or isinstance(e, OSError):
            return TransientModelError(f"{self._model}: the Live API connection closed "
                                       f"mid-instance ({type(e).__name__})")
        return ModelError(f"{self._model}: {type(e).__name__}: {scrub(e, *KEY_VARS)}")

    async def events(self) -> AsyncIterator[Event]:
        while not self._closed:
            try:
                # receive() stops after each turnComplete; the session goes on, so loop
                async for message in self._session.receive():
                    for ev in self._translate(message):
                        yield ev
            except Exception as e:
                if self._closed:
                    return
                raise self._failure(e) from None

    def _translate(self, message: Any) -> list[Event]:
        out: list[Event] = []
        usage = message.usage_metadata
        if usage is not None:
            self._count("prompt_tokens", usage.prompt_token_count)
            self._count("response_tokens", usage.response_token_count)
            self._count("total_tokens", usage.total_token_count)
            self._count("thoughts_tokens", usage.thoughts_token_count)
        if message.go_away is not None:
            # the service will close the connection soon; the close itself is transient and
            # retries the instance, so this is only recorded
            out.append(Error(f"goAway: the service closes the session in "
                             f"{_seconds(message.go_away.time_left)}", code="go_away"))
        content = message.server_content
        if content is None:
            return out
        if content.interrupted:
            # the server cancelled the turn it was generating: stop playback now; its audio
            # never arrives again, and the next audio is a new turn
            out.append(SpeechStarted(interrupt=True))
            self._next_turn()
        # 3.x models may put several parts (audio and text) in one message: read them all
        if content.model_turn is not None:
            for part in content.model_turn.parts or ():
                blob = part.inline_data
                if blob is not None and blob.data and (blob.mime_type or "").startswith(
                        "audio/pcm"):
                    self._turn_has_output = True
                    audio = from_pcm16(blob.data)
                    self.usage["output_audio_s"] += len(audio) / OUT_RATE
                    out.append(AudioDelta(self._item, audio))
        if content.output_transcription is not None and content.output_transcription.text:
            self._turn_has_output = True
            out.append(TranscriptDelta(self._item, content.output_transcription.text))
        if content.generation_complete:
            out.append(ItemDone(self._item))
        if content.turn_complete:
            out.append(ItemDone(self._item))
            out.append(ResponseDone("completed"))
            self._next_turn()
        return out

    async def truncate(self, item_id: str, audio_end_ms: int) -> None:
        """A no-op: the Live API has no truncate call. ``interrupted`` means the server has
        already dropped the rest of the turn from its context; only the local playback is cut
        (by the streaming layer)."""

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:  # a server that never answers the close frame must not hold the instance
            await asyncio.wait_for(self._manager.__aexit__(None, None, None), CLOSE_TIMEOUT_S)
        except asyncio.TimeoutError:
            log.warning("the Live API server did not acknowledge the close in %ss",
                        CLOSE_TIMEOUT_S)
        except Exception as e:  # closing a dead socket is not a new failure
            log.debug("closing the Live API session failed: %s", type(e).__name__)


_FIELDS = {f.name: f for f in dataclasses.fields(GeminiLive)}


def _coerce(name: str, value: Any) -> Any:
    """Options may arrive as strings from the command line or an ini file."""
    value = coerce(NAME, _FIELDS[name], value)
    return value.lower() if name.endswith("_sensitivity") and isinstance(value, str) else value


def factory(**options: Any) -> GeminiLive:
    """Build the model from ``--duplexact-model=gemini-live`` options (docs/models.md)."""
    if "api_key" in options:
        raise ModelConfigError(f"{NAME}: do not pass the API key as an option; set "
                               "GEMINI_API_KEY (or GOOGLE_API_KEY) in the environment")
    unknown = sorted(set(options) - set(_FIELDS))
    if unknown:
        raise ModelConfigError(f"{NAME}: unknown option(s) {', '.join(unknown)}; "
                               f"known: {', '.join(sorted(_FIELDS))}")
    return GeminiLive(**{k: _coerce(k, v) for k, v in options.items()})


def preflight(**options: Any) -> None:
    """Check the package, the key and the options without connecting (the registry calls this
    before any instance runs)."""
    factory(**options)


factory = Adapter(factory, preflight=preflight)
