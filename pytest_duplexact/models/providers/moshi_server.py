"""``--duplexact-model=moshi-server``: a running ``python -m moshi.server`` (Kyutai's Moshi) or
NVIDIA PersonaPlex (its fork of that server), spoken to as its web client speaks to it.

Read from kyutai-labs/moshi ``moshi/moshi/server.py`` and NVIDIA/personaplex
``moshi/moshi/server.py`` (commits in docs/models.md), and the web client's
``useUserAudio.ts``:

* a WebSocket at ``/api/chat`` (port 8998); the server sends the handshake byte ``\\x00`` once
  it holds its one ``asyncio.Lock`` (and, PersonaPlex, after running its voice and text
  prompts through the model): a second client waits there, connected, without a word;
* every message is a kind byte and a payload: ``\\x01`` an Ogg/Opus stream at 24 kHz in both
  directions (``sphn.OpusStreamWriter`` / ``OpusStreamReader``, as the servers use), ``\\x02``
  a UTF-8 text piece from the server (a SentencePiece token, ``▁`` turned into a space);
* the web client encodes 20 ms Opus frames, two to a page, so a page (a message) every 40 ms:
  ``FRAME`` samples per ``append_pcm`` give the same pages;
* PersonaPlex reads ``text_prompt``, ``voice_prompt`` (a file name in its
  ``--voice-prompt-dir``) and ``seed`` from the query string; it fails the connection (closed
  before the handshake, no close frame) for a voice prompt that is not there, and at
  3428dfd for any ``seed`` (it reads ``request["seed"]``, not the query).

Time: the server answers each 80 ms Mimi frame as its input arrives, so its output comes at
the pace of ours; each audio message plays from its arrival (pipelines/streaming_duplex.py). Text:
each piece belongs to one Mimi frame; Kyutai's server sends it right after that frame's audio,
PersonaPlex's right before, so a piece within half a frame of the last audio is that audio's,
and a later one waits for the next. Every audio message is an item of its own; a word (a piece
starting with a space, plus the pieces continuing it) is the text of the item it started in,
so its start is on the frame grid, as the stepped bridge times them (models/util/words.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import ssl
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator
from urllib.parse import urlencode, urlsplit, urlunsplit

import numpy as np
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from ..adapter import Adapter
from ..catalogue.paper_models import MOSHI_START as START_MOSHI
from ..catalogue.paper_models import PERSONAPLEX_START as START_PERSONAPLEX
from ..contract import DuplexModel, ModelError, Probed, SessionInfo
from ..model_options import (
    ModelConfigError,
    build,
    require_positive,
    shown_url,
    tls_context,
)
from ..streaming_contract import (
    AudioDelta,
    Chunker,
    Event,
    ItemDone,
    ServerUnreachable,
    TranscriptDelta,
    TransientModelError,
    admitting,
)
from ..util.ws_session import DuplexSocketSession, sync_connect

log = logging.getLogger(__name__)

LABEL = "moshi-server"
PATH = "/api/chat"
SAMPLE_RATE = 24_000        # Mimi's rate, both ways
FRAME = 480                 # the web client's Opus frame (encoderFrameSize 20 ms)
MIMI_FRAME_S = 0.08         # one model step: the server's output comes one page per step
HANDSHAKE, AUDIO, TEXT = 0, 1, 2
SPHN_INSTALL = "pip install 'sphn>=0.2,<0.3'"
MAX_MESSAGE = 1 << 20       # one Opus page or text piece is a few hundred bytes


@dataclass(frozen=True)
class MoshiServer:
    """Options (``--duplexact-model-option``)."""

    url: str = ""                    # ws[s]://HOST:8998/api/chat (http[s]:// is taken too)
    text_prompt: str | None = None   # PersonaPlex: the persona ("You are a wise ...")
    voice_prompt: str | None = None  # PersonaPlex: a file in its --voice-prompt-dir (NATF0.pt)
    seed: int | None = None          # PersonaPlex: the session's seed (-1: none)
    native_transcript: bool = True   # the text pieces; false: the run's transcriber listens
    ca_file: str = ""                # wss:// with a self-signed certificate: trust this PEM
    server_name: str = ""            # wss://: the name to check the certificate against
    verify: bool = True              # wss://: false accepts any certificate
    max_sessions: int = 1            # the server's lock: one session at a time
    connect_timeout: float = 20.0    # the WebSocket handshake
    lock_timeout: float = 600.0      # the handshake byte: another session may hold the lock
    probe_timeout: float = 30.0      # the preflight's wait for the handshake byte
    close_timeout: float = 5.0

    def __post_init__(self):
        if not self.url:
            raise ModelConfigError(
                f"{LABEL}: no server. Start it ({START_MOSHI}, or PersonaPlex's "
                f"{START_PERSONAPLEX}) and pass --duplexact-model-option "
                "url=ws://HOST:8998/api/chat (wss:// when it runs with --ssl; docs/models.md)")
        if urlsplit(self.url).scheme.lower() not in ("ws", "wss", "http", "https"):
            raise ModelConfigError(f"{LABEL}: url {shown_url(self.url)!r} must start with "
                                   "ws://, wss://, http:// or https://")
        if not urlsplit(self.url).hostname:
            raise ModelConfigError(f"{LABEL}: url {shown_url(self.url)!r} names no host")
        if self.ca_file and not os.path.isfile(os.path.expanduser(self.ca_file)):
            raise ModelConfigError(f"{LABEL}: option ca_file: no such file {self.ca_file!r} "
                                   "(the cert.pem in the server's --ssl folder)")
        secure = self.endpoint().startswith("wss")
        if (self.server_name or not self.verify or self.ca_file) and not secure:
            raise ModelConfigError(f"{LABEL}: ca_file, server_name and verify=false apply to "
                                   "wss:// (a server started with --ssl) only")
        if not self.verify and self.ca_file:
            raise ModelConfigError(f"{LABEL}: ca_file and verify=false contradict each other: "
                                   "keep one")
        require_positive(LABEL, self, "max_sessions", "connect_timeout", "lock_timeout",
                         "probe_timeout", "close_timeout")

    def endpoint(self) -> str:
        parts = urlsplit(self.url)
        scheme = {"http": "ws", "https": "wss"}.get(parts.scheme.lower(), parts.scheme.lower())
        path = parts.path if parts.path not in ("", "/") else PATH
        return urlunsplit((scheme, parts.netloc, path, parts.query, ""))

    def query(self) -> dict[str, str]:
        """PersonaPlex's query parameters, those set; it reads ``text_prompt`` whenever it
        reads ``voice_prompt``, so a voice prompt alone sends an empty text prompt."""
        q: dict[str, str] = {}
        if self.text_prompt is not None or self.voice_prompt is not None:
            q["text_prompt"] = self.text_prompt or ""
        if self.voice_prompt is not None:
            q["voice_prompt"] = self.voice_prompt
        if self.seed is not None:
            q["seed"] = str(self.seed)
        return q

    def session_url(self) -> str:
        parts = urlsplit(self.endpoint())
        joined = "&".join(q for q in (parts.query, urlencode(self.query())) if q)
        return urlunsplit((parts.scheme, parts.netloc, parts.path, joined, ""))

    def connect_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"max_size": MAX_MESSAGE, "compression": None,
                                   "open_timeout": self.connect_timeout,
                                   "close_timeout": self.close_timeout}
        if self.endpoint().startswith("wss"):
            options["ssl"] = tls_context(self.ca_file, verify=self.verify)
            if self.server_name:
                options["server_hostname"] = self.server_name
        return options

    # -- what went wrong, in one line each ---------------------------------------------------

    def unreached(self, e: BaseException) -> ModelError:
        """A failed connection as the line that says which of "not running", "TLS mismatch"
        or "not a moshi server" it is (``ServerUnreachable`` for nothing listening)."""
        url = shown_url(self.endpoint())
        plain = url.replace("wss://", "ws://", 1)
        if isinstance(e, ssl.SSLCertVerificationError):
            return ModelConfigError(
                f"{LABEL}: TLS: {url}'s certificate is not trusted ({e.verify_message}): pass "
                "ca_file=<cert.pem of the server's --ssl folder> (server_name=<its name> if "
                "not the URL's host), or verify=false for a server you trust")
        if isinstance(e, ssl.SSLError):
            return ModelConfigError(f"{LABEL}: TLS mismatch: {url} does not answer TLS (the "
                                    f"server runs without --ssl): use url={plain}")
        if isinstance(e, InvalidStatus):
            status = e.response.status_code
            if status == 404:
                return ModelConfigError(
                    f"{LABEL}: not a moshi server: HTTP 404 at {url} (a moshi server answers "
                    f"at {PATH}; is that the path, and the port the one moshi.server printed?)")
            return ModelConfigError(f"{LABEL}: not a moshi server: {url} answered HTTP "
                                    f"{status} to the WebSocket handshake")
        if isinstance(e, (ConnectionRefusedError, socket.gaierror)) or (
                isinstance(e, OSError) and not isinstance(e, ConnectionResetError)):
            return ServerUnreachable(
                f"{LABEL}: not running: nothing answers at {url} ({type(e).__name__}): start "
                f"it ({START_MOSHI}, or PersonaPlex's {START_PERSONAPLEX}); it listens only "
                "once its model is loaded and warmed up")
        if not url.startswith("wss") and self._speaks_tls():
            return ModelConfigError(
                f"{LABEL}: TLS mismatch: the server at {url} serves TLS (started with --ssl): "
                f"use url=wss://{url.partition('://')[2]} with ca_file=<its cert.pem> or "
                "verify=false")
        if isinstance(e, (InvalidHandshake, ConnectionResetError, EOFError)):
            return ModelConfigError(f"{LABEL}: not a moshi server: {url} did not complete a "
                                    f"WebSocket handshake ({type(e).__name__})")
        return TransientModelError(f"{LABEL}: could not connect to {url}: "
                                   f"{type(e).__name__}")

    def _speaks_tls(self) -> bool:
        """Whether a TLS handshake succeeds at the URL's host and port (a ws:// URL to a
        server started with --ssl fails its WebSocket handshake without saying why)."""
        parts = urlsplit(self.endpoint())
        try:
            with socket.create_connection((parts.hostname, parts.port or 80),
                                          timeout=self.connect_timeout) as raw:
                with tls_context(verify=False).wrap_socket(raw, server_hostname=parts.hostname):
                    return True
        except (OSError, ssl.SSLError):
            return False

    def refused(self) -> ModelError:
        """The server closed the connection before its handshake: what PersonaPlex does for
        a voice prompt that is not in its folder, for a session without one, for any seed
        (at 3428dfd), and for a failure of its own while it runs the prompts."""
        if self.voice_prompt is None:
            why = ("a PersonaPlex server does so without voice_prompt=<a file in its "
                   "--voice-prompt-dir, e.g. NATF0.pt> (and text_prompt=...); Moshi's only "
                   "when it stops")
        else:
            why = (f"PersonaPlex does so when voice_prompt {self.voice_prompt!r} is not a file "
                   "in the folder it was started with (--voice-prompt-dir; its log names the "
                   "folder), or when running the prompts failed (its log says why)")
        if self.seed is not None:
            why += ("; PersonaPlex (NVIDIA/personaplex@3428dfd) fails every session given a "
                    "seed: drop the seed option")
        return ModelConfigError(f"{LABEL}: the server closed the connection before its "
                                f"handshake: {why}")

    def not_moshi(self, first: bytes | str) -> ModelConfigError:
        head = first[:1].hex() if isinstance(first, bytes) else "a text frame"
        return ModelConfigError(f"{LABEL}: not a moshi server: its first message at "
                                f"{shown_url(self.endpoint())} was {head}, not the handshake "
                                "byte 00")


def sphn_module():
    """sphn (the Opus library both servers use), or the line that installs it."""
    try:
        import sphn
    except ImportError:
        raise ModelConfigError(f"{LABEL}: the Python package sphn is not installed "
                               f"({SPHN_INSTALL})") from None
    return sphn


# --- the model and its sessions -------------------------------------------------------------

class MoshiServerModel(DuplexModel):
    """A moshi server as a ``StreamingModel``: at most ``max_sessions`` trials at once (the
    server's lock makes any more wait for their handshake, never fail)."""

    def __init__(self, cfg: MoshiServer):
        self.cfg = cfg
        self.input_sample_rate = self.output_sample_rate = SAMPLE_RATE
        self.max_concurrency = cfg.max_sessions  # read by run/harness.py
        self.name = LABEL
        self._sphn = sphn_module()

    async def connect(self, info: SessionInfo) -> "MoshiServerSession":
        """Open the WebSocket and wait for the handshake byte. The wait for the lock is before
        the instance's clock starts (it starts at the first input), so it is no model time;
        it is bounded by ``lock_timeout``."""
        cfg = self.cfg
        err: ModelError | None = None
        try:
            ws = await ws_connect(cfg.session_url(), **cfg.connect_options())
        except Exception as e:
            err = cfg.unreached(e)
        if err is not None:  # raised outside the except that holds the library's error
            raise err
        try:
            t0 = time.monotonic()
            try:
                with admitting():  # the server's lock: not model time (models/streaming_contract.py)
                    first = await asyncio.wait_for(ws.recv(), cfg.lock_timeout)
            except asyncio.TimeoutError:
                err = TransientModelError(
                    f"{LABEL}: no handshake within {cfg.lock_timeout:g} s (lock_timeout): the "
                    "server serves one session at a time and another held it all along")
            except ConnectionClosed:
                err = cfg.refused()
            if err is not None:
                raise err
            if first != bytes([HANDSHAKE]):
                raise cfg.not_moshi(first)
            waited = time.monotonic() - t0
            if waited > 1.0:
                log.info("%s: waited %.1f s for the server's handshake", LABEL, waited)
        except BaseException:
            await ws.close()
            raise
        return MoshiServerSession(ws, self)


class MoshiServerSession(DuplexSocketSession):
    """The ``StreamingSession`` protocol over one moshi-server connection."""

    def __init__(self, ws: Any, model: MoshiServerModel):
        self._ws, self._cfg = ws, model.cfg
        self._writer = model._sphn.OpusStreamWriter(SAMPLE_RATE)
        self._reader = model._sphn.OpusStreamReader(SAMPLE_RATE)
        self._chunks = Chunker(FRAME)
        self._text = TextFrames(model.cfg.native_transcript)
        self._closed = False
        self.usage: dict[str, float] = {"audio_in_s": 0.0, "audio_out_s": 0.0}

    async def send(self, pcm: np.ndarray) -> None:
        """Each whole 20 ms frame into the Opus stream; each page out as it completes."""
        for chunk in self._chunks.push(pcm):
            page = self._writer.append_pcm(np.ascontiguousarray(chunk, dtype=np.float32))
            self.usage["audio_in_s"] += len(chunk) / SAMPLE_RATE
            if not len(page):
                continue
            dropped = None
            try:
                await self._ws.send(bytes([AUDIO]) + page)
            except ConnectionClosed as e:
                dropped = e.rcvd.code if e.rcvd is not None else "no close frame"
            if dropped is not None:
                raise TransientModelError(f"{LABEL}: the server closed the session "
                                          f"mid-instance ({dropped})")

    async def events(self) -> AsyncIterator[Event]:
        while True:
            dropped = None
            try:
                message = await self._ws.recv()
            except ConnectionClosed as e:
                if self._closed:
                    return
                dropped = e.rcvd.code if e.rcvd is not None else "no close frame"
            if dropped is not None:  # outside the except: its exception holds the frame
                raise TransientModelError(f"{LABEL}: the server closed the session "
                                          f"mid-instance ({dropped})")
            if isinstance(message, str) or not message:
                continue  # the servers send neither; they ignore what they do not know
            kind, payload = message[0], message[1:]
            now = time.monotonic()
            if kind == AUDIO:
                try:
                    pcm = self._reader.append_bytes(payload)
                except Exception as e:  # sphn's own error type varies between versions
                    broken = f"{type(e).__name__}: {e}"
                else:
                    broken = None
                if broken is not None:
                    raise ModelError(f"{LABEL}: the server's Ogg/Opus stream does not decode "
                                     f"({broken[:200]})")
                if pcm.size:
                    self.usage["audio_out_s"] += pcm.size / SAMPLE_RATE
                    for ev in self._text.audio(np.asarray(pcm, dtype=np.float32), now):
                        yield ev
            elif kind == TEXT:
                for ev in self._text.piece(payload.decode("utf-8", "replace"), now):
                    yield ev
            # a repeated handshake or an unknown kind: nothing to hear

    async def _close(self) -> None:
        """Close the socket: the server's receive loop ends and it releases its lock."""
        try:
            await asyncio.wait_for(self._ws.close(), self._cfg.close_timeout)
        except Exception as e:  # a dead server must not hold the instance
            log.debug("%s: closing the socket failed: %s", LABEL, type(e).__name__)


class TextFrames:
    """Audio messages and text pieces as items (the module docstring): each audio message an
    item; a word's pieces the text of the item it started in. Pure: each call takes the
    arrival time."""

    def __init__(self, native: bool = True):
        self.native = native
        self._n = 0
        self._last: str | None = None   # the item of the last audio message
        self._last_at = float("-inf")
        self._pending: list[str] = []   # pieces that wait for the next audio
        self._word: str | None = None   # the item holding the word being spoken
        self._quiet = 0                 # audio messages since the word's last piece

    def audio(self, pcm: np.ndarray, at: float) -> list[Event]:
        out: list[Event] = []
        if self._last is not None and self._last != self._word:
            out.append(ItemDone(self._last))
        if self._word is not None and self._quiet >= 2:  # a pause: the word has ended
            out.append(ItemDone(self._word))
            self._word = None
        self._n += 1
        item = f"moshi_{self._n}"
        self._last, self._last_at = item, at
        self._quiet += 1
        out.append(AudioDelta(item, pcm))
        if self._pending:
            text, self._pending = "".join(self._pending), []
            out += self._place(text, item)
        return out

    def piece(self, text: str, at: float) -> list[Event]:
        if not self.native or not text:
            return []
        if self._last is not None and at - self._last_at <= MIMI_FRAME_S / 2:
            return self._place(text, self._last)
        self._pending.append(text)
        return []

    def _place(self, text: str, item: str) -> list[Event]:
        out: list[Event] = []
        if self._word is None or text[0].isspace():
            if self._word is not None and self._word != item:
                out.append(ItemDone(self._word))
            self._word = item
            # a word's item holds only it: its leading space would take a share of the
            # frame (the playback spreads an item's text over its audio) and move it off
            # the frame's start
            text = text.lstrip()
            if not text:
                return out
        out.append(TranscriptDelta(self._word, text))
        self._quiet = 0
        return out


# --- the preflight's probe ------------------------------------------------------------------

def probe(cfg: MoshiServer) -> Probed:
    """Connect once and wait for the handshake byte (``probe_timeout``), then close: one line
    for "not running", "TLS mismatch", "not a moshi server" or a refused voice prompt
    (``ModelConfigError``); a server whose lock another session holds is reported busy (the
    run waits for it)."""
    ws, err = None, None
    try:
        ws = sync_connect(cfg.session_url(), **cfg.connect_options())
    except Exception as e:
        err = cfg.unreached(e)
    if err is not None:
        raise ModelConfigError(str(err))
    where = shown_url(cfg.endpoint())
    try:
        t0 = time.monotonic()
        first, busy = None, False
        try:
            first = ws.recv(timeout=cfg.probe_timeout)
        except TimeoutError:
            busy = True
        except ConnectionClosed:
            err = cfg.refused()
        if err is not None:
            raise err
        if busy:
            return Probed(f"a WebSocket at {PATH} that sent no handshake within "
                          f"{cfg.probe_timeout:g} s: busy with another session (the run waits "
                          f"up to lock_timeout={cfg.lock_timeout:g} s for it) or not a moshi "
                          "server", "", cfg.max_sessions, where)
        if first != bytes([HANDSHAKE]):
            raise cfg.not_moshi(first)
        took = time.monotonic() - t0
        return Probed(f"a moshi server: handshake after {took:.1f} s, 24 kHz Opus, one "
                      "session at a time", "", cfg.max_sessions, where)
    finally:
        ws.close()


def factory(**options: Any) -> MoshiServerModel:
    """``--duplexact-model=moshi-server``."""
    return MoshiServerModel(build(MoshiServer, LABEL, None, options))


def preflight(**options: Any) -> None:
    """The options and sphn, without connecting."""
    build(MoshiServer, LABEL, None, options)
    sphn_module()


def probed(**options: Any) -> Probed:
    """The run's preflight: connect once (``probe``)."""
    return probe(build(MoshiServer, LABEL, None, options))


def reach(**options: Any) -> str:
    """``duplexact models moshi-server -o url=...``: what answers at the URL now."""
    return probed(**options).description


factory = Adapter(factory, preflight=preflight, reach=reach, probe=probed)
