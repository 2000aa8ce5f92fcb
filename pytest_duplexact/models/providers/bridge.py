"""``--duplexact-model=bridge``: any server speaking the duplexact bridge protocol v1
(docs/bridge-protocol.md; the wire format is ``bridges/wire.py``, shared with the kit).

``--duplexact-model-option url=ws://gpu-box:8765`` names the server; every other option that
is not one of the client's own (``BridgeClient`` below) travels to the server as a query
parameter, next to ``trial_id`` (the instance) and ``run_seed`` (the run's seed).

The run's preflight connects once (a probe: READY, then CLOSE; ``probed``, the factory's
``probe``) to learn how the server runs, so a wrong URL or scheme, a refused key or options
the server rejects fail the run in one line before it starts, and a ``--duplexact-batch`` or
``--duplexact-concurrency`` above READY's ``max_sessions`` is refused there; building the
model reuses that READY (or probes, where no preflight ran: an xdist worker). Then, per
READY's ``mode``:

* ``stepped``: a ``SteppedModel`` (models/contract.py) at READY's rate and frame. Each trial is
  one connection; each ``step`` sends one AUDIO frame and blocks for the TEXT* + AUDIO answer
  (``step_timeout``), so onsets are frame-exact and the run deterministic, as in process.
  The server's TEXT is the model's own words, timed by the frame they arrive with
  (models/util/words.py, the rule Moshi's inner monologue uses in process).
* ``streaming``: a ``StreamingModel`` (models/contract.py; its session: models/streaming_contract.py), on
  the wall clock as the hosted adapters are (pipelines/streaming_duplex.py): input goes out in
  READY-``frame``-sized AUDIO messages as it is due; each AUDIO from the server plays from its
  arrival, and the TEXT before it belongs to it.

Errors: the server's ERROR, or its CLOSE before ours, is a model error of the instance
(final). A refused connection (``ServerUnreachable``: several instances in a row stop the
run), a dropped one, a handshake the server answers 429/502/503/504 and
a READY that does not come within ``ready_timeout`` are transient (the trial is retried from
scratch). A step with no answer within ``step_timeout`` is a model error naming the step.

Key: ``DUPLEXACT_BRIDGE_API_KEY``, when set, goes as ``Authorization: Bearer`` and never over
plain ``ws://`` to another machine (remote/netsafety.py; ``allow_insecure=true`` opts out). It
is held masked (``Secret``), so a ``-l`` traceback cannot show it. Every text the server sends
(READY, TEXT, ERROR, CLOSE payloads, a close frame's reason) is scrubbed as it is received
(``_received``, ``_close_code``: netsafety.scrub_received), and no error is raised from inside
the ``except`` that holds a library's exception, so neither a message, a file nor a frame's
locals keep the raw text. What the server chooses is bounded (bridges/wire.py): READY's rate
and frame, the TEXT of one step, and (streaming) how far its audio runs ahead of the clock.
"""

from __future__ import annotations

import asyncio
import difflib
import logging
import os
import ssl
import time
from dataclasses import dataclass, field, fields
from typing import Any, AsyncIterator
from urllib.parse import urlencode, urlsplit, urlunsplit

import numpy as np
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from ...bridges import wire
from ...data.timeline import Word
from ...remote.netsafety import BearerHeaders, Secret
from ..adapter import Adapter
from ..contract import DuplexModel, ModelError, Probed, SessionInfo, StepOutput
from ..model_options import (
    ModelConfigError,
    check_transport,
    coerce,
    connect_error,
    scrub,
    shown_url,
    tls_context,
)
from ..slots import PerSlotBatch
from ..streaming_contract import (
    DEFAULT_CHUNK_MS,
    AudioDelta,
    Chunker,
    Event,
    ItemDone,
    ServerUnreachable,
    TranscriptDelta,
    TransientModelError,
    admitting,
    stop_and_close,
)
from ..util.words import TextStream
from ..util.ws_session import DuplexSocketSession, sync_connect

log = logging.getLogger(__name__)

LABEL = "bridge"
KEY_ENV = "DUPLEXACT_BRIDGE_API_KEY"
MAX_AHEAD_S = wire.MAX_AHEAD_S  # streaming: audio a server may send ahead of real time


@dataclass(frozen=True)
class BridgeClient:
    """The client's own options; every other ``--duplexact-model-option`` goes to the server."""

    url: str = ""
    allow_insecure: bool = False   # a key over plain ws:// to another host (trusted network)
    connect_timeout: float = 20.0  # the WebSocket handshake
    ready_timeout: float = 60.0    # READY after the handshake (a busy server queues trials)
    step_timeout: float = wire.STEP_TIMEOUT_S  # stepped: one step's answer (kit: idle limit)
    close_timeout: float = 5.0     # the server's CLOSE after ours
    chunk_ms: float = DEFAULT_CHUNK_MS  # streaming: the wall-clock pace of the input
    ca_file: str = ""              # wss:// with a self-signed certificate: trust this PEM
    server_name: str = ""          # wss://: the name to verify the certificate against
    verify: bool = True            # wss://: false accepts any certificate (a trusted network)
    server_options: dict[str, str] = field(default_factory=dict)
    label: str = LABEL             # the name in messages (raon-speechchat reuses the client)
    key_env: str = KEY_ENV

    def __post_init__(self):
        if not self.url:
            raise ModelConfigError(
                f"{self.label}: no server. Start a bridge (python -m "
                "pytest_duplexact.bridges.<model> --port 8765 ...) and pass "
                "--duplexact-model-option url=ws://HOST:8765 (docs/bridge-protocol.md)")
        if urlsplit(self.url).scheme not in ("ws", "wss"):
            raise ModelConfigError(f"{self.label}: url {self.url!r} must start with ws:// or "
                                   "wss://")
        if self.ca_file and not os.path.isfile(os.path.expanduser(self.ca_file)):
            raise ModelConfigError(f"{self.label}: option ca_file: no such file "
                                   f"{self.ca_file!r}")
        check_transport(self.label, self.url, key_env=self.key_env,
                        carries_key=bool(os.environ.get(self.key_env)),
                        allow_insecure=self.allow_insecure)
        self._check_tls()
        for name in ("connect_timeout", "ready_timeout", "step_timeout", "close_timeout",
                     "chunk_ms"):
            if not getattr(self, name) > 0:
                raise ModelConfigError(f"{self.label}: {name} must be positive")

    def _check_tls(self) -> None:
        """``server_name`` and ``verify`` are about a wss:// certificate; an unverified one
        may be anybody's, so the key does not go to it unless ``allow_insecure``."""
        if (self.server_name or not self.verify) and not self.url.startswith("wss"):
            raise ModelConfigError(f"{self.label}: server_name and verify=false apply to "
                                   f"wss:// only, not {urlsplit(self.url).scheme}://")
        if not self.verify and self.ca_file:
            raise ModelConfigError(f"{self.label}: ca_file and verify=false contradict each "
                                   "other: keep ca_file (with server_name if the certificate "
                                   "names another host)")
        if not self.verify and os.environ.get(self.key_env) and not self.allow_insecure:
            raise ModelConfigError(f"{self.label}: refusing to send {self.key_env} to a server "
                                   "whose certificate is not checked (verify=false); pass "
                                   "ca_file= instead, or allow_insecure=true on a trusted "
                                   "network")

    def trial_url(self, info: SessionInfo | None) -> str:
        """The URL of one trial: the server's options plus who the trial is."""
        query = dict(self.server_options)
        if info is not None:
            query[wire.TRIAL_PARAM] = str(getattr(info.instance, "id", "") or "")
            query[wire.SEED_PARAM] = str(int(info.seed))
        parts = urlsplit(self.url)
        joined = "&".join(q for q in (parts.query, urlencode(query)) if q)
        return urlunsplit((parts.scheme, parts.netloc, parts.path or "/", joined, ""))

    def connect_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"max_size": wire.MAX_MESSAGE, "compression": None,
                                   "open_timeout": self.connect_timeout,
                                   "close_timeout": self.close_timeout}
        if self.url.startswith("wss"):
            options["ssl"] = tls_context(self.ca_file, verify=self.verify)
            if self.server_name:
                options["server_hostname"] = self.server_name
        return options

    def headers(self, key: Secret | None) -> BearerHeaders | None:
        return BearerHeaders(key) if key is not None else None

    def key(self) -> Secret | None:
        value = os.environ.get(self.key_env)
        return Secret(value) if value else None

    def connect_failed(self, e: BaseException) -> ModelError:
        if isinstance(e, ssl.SSLCertVerificationError):  # final: a retry cannot fix it
            return ModelError(
                f"{self.label}: the server's TLS certificate did not verify "
                f"({e.verify_message}): pass ca_file=<its PEM>, server_name=<the name in "
                "it> if that is not the URL's host (Raon's demo: raon-speechchat-demo), or "
                "verify=false for a server you trust")
        return connect_error(e, self.label, (self.key_env,),
                             rejected="the bridge server refused the key",
                             not_found=f"{self.url}: no bridge at this path",
                             transient=frozenset({429, 502, 503, 504}), busy="server busy",
                             other=": is it a bridge server?")

    def scrubbed(self, payload: bytes | str) -> str:
        return scrub(wire.utf8(payload) if isinstance(payload, bytes) else payload,
                     self.key_env)


_TEXTUAL = frozenset({wire.READY, wire.TEXT, wire.ERROR, wire.CLOSE})


def _received(client: BridgeClient, message: bytes | str) -> tuple[int, bytes]:
    """``(kind, payload)`` of a message from the server, its text already scrubbed: the raw
    payload is never held by a caller's local (what ``pytest -l`` shows)."""
    kind, payload = wire.split(message)
    if kind in _TEXTUAL and payload:
        payload = client.scrubbed(payload).encode("utf-8")
    return kind, payload


def _unreached(client: BridgeClient, e: Exception) -> str:
    """Why the probe could not open a connection, saying what to check."""
    err = client.connect_failed(e)
    url = shown_url(client.url)
    if isinstance(err, ModelConfigError):  # a refused key: the message says what to do
        return str(err)
    if isinstance(e, ssl.SSLCertVerificationError):
        return (f"{client.label}: {url}: its certificate is not trusted ({e.verify_message}): "
                "for a self-signed one pass ca_file=CERT.pem, the bridge's certificate")
    if isinstance(e, ssl.SSLError):
        return (f"{client.label}: {url} does not answer TLS ({type(e).__name__}): if the "
                f"bridge serves ws://, use url=ws://{url.partition('://')[2]}")
    if isinstance(e, InvalidHandshake) and getattr(e, "response", None) is None:
        return (f"{client.label}: something answers at {url}, but not as a WebSocket server "
                f"({type(e).__name__}: {client.scrubbed(str(e))}): is it a bridge's address, and its scheme "
                "(ws:// or wss://) the one the bridge serves?")
    if isinstance(err, ServerUnreachable):
        return f"{err}; is the bridge running at {url}?"
    return str(err)


def _ready_of(client: BridgeClient, kind: int, payload: bytes, transient: bool) -> wire.Ready:
    """The READY of a connection (the first message), or the error it says instead."""
    if kind == wire.ERROR:
        why = client.scrubbed(payload)
        cls = TransientModelError if transient else ModelError
        raise cls(f"{client.label}: the server refused the trial: {why}")
    if kind != wire.READY:
        raise ModelError(f"{client.label}: the first message was {wire.kind_name(kind)}, "
                         "not READY: is it a bridge server?")
    try:
        return wire.parse_ready(payload)
    except wire.ProtocolError as e:
        raise ModelError(f"{client.label}: {e}") from None


def _same_ready(client: BridgeClient, probe: wire.Ready, got: wire.Ready) -> None:
    if (got.mode, got.sample_rate, got.frame) != (probe.mode, probe.sample_rate, probe.frame):
        raise ModelError(f"{client.label}: the server changed how it runs ({got.mode}, "
                         f"{got.sample_rate} Hz, frame {got.frame}; it said {probe.mode}, "
                         f"{probe.sample_rate} Hz, frame {probe.frame} at the start): "
                         "restarted with other settings?")


# --- the probe --------------------------------------------------------------------------------

def probe(client: BridgeClient) -> wire.Ready:
    """Connect once, read READY, end the trial: how the server runs (ModelConfigError when it
    cannot be reached or refuses)."""
    ws, why = None, None
    try:
        ws = sync_connect(client.trial_url(None), additional_headers=client.headers(
            client.key()), **client.connect_options())
    except Exception as e:
        why = _unreached(client, e)
    if why is not None:  # raised here, not in the except that holds the handshake's error
        raise ModelConfigError(why)
    try:
        broke = None
        try:
            kind, payload = _received(client, ws.recv(timeout=client.ready_timeout))
        except TimeoutError:
            broke = f"no READY from {client.url} within {client.ready_timeout:g} s"
        except (ConnectionClosed, wire.ProtocolError) as e:
            broke = (f"{client.url} closed or broke the connection before READY: "
                     f"{_why(client, e)}")
        if broke is not None:  # raised here, not in the except that holds the library's error
            raise ModelConfigError(f"{client.label}: {broke}")
        try:
            return _ready_of(client, kind, payload, transient=False)
        except ModelError as e:
            refused = f"{e}{meant(client.server_options, str(e))}"
        raise ModelConfigError(refused)
    finally:
        try:
            ws.send(wire.frame(wire.CLOSE))
        except Exception:
            pass
        ws.close()


def _connect_sync(client: BridgeClient, url: str, key: Secret | None
                  ) -> tuple[Any, ModelError | None]:
    """A blocking connection, or the error that says why not (built outside the ``except``,
    so the handshake's exception, which may quote the server's answer, is no local of a
    raising frame)."""
    try:
        return sync_connect(url, additional_headers=client.headers(key),
                            **client.connect_options()), None
    except Exception as e:
        err = client.connect_failed(e)
    return None, err


def _why(client: BridgeClient, e: Exception) -> str:
    """A receive's failure in words, scrubbed (a close frame's reason is the server's)."""
    return _close_code(client, e) if isinstance(e, ConnectionClosed) else client.scrubbed(str(e))


# --- stepped ----------------------------------------------------------------------------------

class BridgeStepped(PerSlotBatch):
    """A stepped bridge as a ``SteppedModel``: one connection per trial, lockstep frames.
    Batched (``--duplexact-batch=B``): each slot is a connection of its own; ``step_batch``
    sends every slot's frame before it waits for the answers, so a server that batches
    (bridges/kit.py, BatchStepper) steps them in one model call."""

    retries_transient = True  # a refused or dropped connection: run the trial again

    def __init__(self, client: BridgeClient, ready: wire.Ready):
        self.client, self.ready = client, ready
        self.sample_rate, self.frame_size = ready.sample_rate, ready.frame
        self.name = ready.model or client.label
        self._key = client.key()
        self._ws: Any = None
        self._k = 0
        self._early: tuple[int, bytes] | None = None  # a message read ahead of its step
        self._asked = False  # a frame went out whose answer has not come (an error ended it)
        self._text = TextStream(ready.frame_s)

    def start(self, info: SessionInfo) -> None:
        c = self.client
        try:
            self.finish()
        except ModelError:  # the previous trial's surplus is no concern of this one
            pass
        self._ws, err = _connect_sync(c, c.trial_url(info), self._key)
        if err is not None:
            raise err
        try:
            with admitting():  # a server busy with other trials holds READY back
                kind, payload = self._recv("READY", _Deadline(c.ready_timeout),
                                           "ready_timeout", transient=True)
            _same_ready(c, self.ready, _ready_of(c, kind, payload, transient=False))
        except BaseException:  # a queued connection left open would hold a server slot
            ws, self._ws = self._ws, None
            try:
                ws.close()
            except Exception as e:
                log.debug("%s: closing after no READY: %s", c.label, e)
            raise
        self._k = 0
        self._early, self._asked = None, False
        self._text = TextStream(self.ready.frame_s)

    def _recv(self, what: str, deadline: "_Deadline", option: str, *,
              transient: bool = False) -> tuple[int, bytes]:
        """The next message by ``deadline`` (the ``option`` that set it), PINGs answered on
        the way."""
        c = self.client
        while True:
            if self._early is not None:
                (kind, payload), self._early = self._early, None
                return kind, payload
            failed: ModelError | None = None
            try:
                kind, payload = _received(c, self._ws.recv(timeout=deadline.left()))
            except TimeoutError:
                cls = TransientModelError if transient else ModelError
                busy = " (the server queues trials beyond what it runs at once: more at once " \
                    "than it serves, from --duplexact-batch or -n, wait here)" \
                    if what == "READY" else ""
                failed = cls(f"{c.label}: no {what} from the server within "
                             f"{getattr(c, option):g} s ({option}){busy}")
            except (ConnectionClosed, wire.ProtocolError) as e:
                failed = _broken(c, e, f"waiting for {what}")
            if failed is not None:
                raise failed
            if kind == wire.PING:
                try:
                    self._ws.send(wire.frame(wire.PONG, payload))
                except ConnectionClosed:  # what the server sent before closing still counts
                    pass
                continue
            if kind == wire.PONG:
                continue
            return kind, payload

    def step(self, frame: np.ndarray) -> StepOutput:
        self._send(frame)
        return self._answer()

    def step_batch(self, frames) -> dict:
        out: dict = {}
        for slot, frame in frames.items():  # all frames out first: the server gathers them
            try:
                self._slots[slot]._send(frame)
            except Exception as e:
                out[slot] = e
        for slot in frames:
            if slot not in out:
                try:
                    out[slot] = self._slots[slot]._answer()
                except Exception as e:  # this trial's error alone
                    out[slot] = e
        return out

    def _at(self) -> str:
        return f"step {self._k} ({self._k * self.ready.frame_s:.2f} s)"

    def _send(self, frame: np.ndarray) -> None:
        if self._k:
            self._nothing_after_the_answer()
        try:
            self._ws.send(wire.audio(frame))
        except ConnectionClosed as e:
            why = _close_code(self.client, e)
        else:
            self._asked = True
            return
        raise TransientModelError(f"{self.client.label}: the connection dropped at "
                                  f"{self._at()} ({why})")

    def _nothing_after_the_answer(self) -> None:
        """Before the next step goes out: a second AUDIO already there for the last step is a
        protocol error (the steps would go out of step); anything else waits for its step. One
        that comes later is seen a step later, or by ``finish`` (every AUDIO must answer a
        step), so a trial with a surplus AUDIO always fails."""
        try:
            kind, payload = self._recv("more", _Deadline(0), "step_timeout", transient=True)
        except TransientModelError:  # nothing there now, or a drop the next send meets
            return
        if kind == wire.AUDIO:
            raise self._surplus(self._k - 1)
        self._early = (kind, payload)

    def _surplus(self, k: int) -> ModelError:
        return ModelError(f"{self.client.label}: the server sent a second AUDIO for one "
                          f"step, seen after its answer to step {k} ({k * self.ready.frame_s:.2f}"
                          " s); a stepped bridge answers each step with exactly one (protocol "
                          "error)")

    def _answer(self) -> StepOutput:
        c, k = self.client, self._k
        at = self._at()
        texts: list[str] = []
        size = 0
        deadline = _Deadline(c.step_timeout)
        while True:
            kind, payload = self._recv(f"answer to {at}", deadline, "step_timeout")
            if kind == wire.AUDIO:
                break
            if kind == wire.TEXT:
                size += len(payload)
                if size > wire.MAX_TEXT:
                    raise ModelError(f"{c.label}: more than {wire.MAX_TEXT} bytes of TEXT in "
                                     f"the answer to {at} (the bound per step)")
                texts.append(wire.utf8(payload))
            elif kind == wire.ERROR:
                raise ModelError(f"{c.label}: the server reported an error at {at}: "
                                 f"{c.scrubbed(payload)}")
            elif kind == wire.CLOSE:
                reason = f": {c.scrubbed(payload)}" if payload else ""
                raise ModelError(f"{c.label}: the server ended the trial at {at}, before its "
                                 f"end (CLOSE){reason}")
            elif kind == wire.READY:
                raise ModelError(f"{c.label}: a second READY at {at}")
            # other kinds (traces) are ignored
        try:
            audio = wire.pcm(payload)
        except wire.ProtocolError as e:
            raise ModelError(f"{c.label}: {e}, at {at}") from None
        if audio.size != self.frame_size:
            raise ModelError(f"{c.label}: the server answered {at} with {audio.size} samples; "
                             f"a stepped bridge answers exactly frame={self.frame_size} "
                             f"(its READY)")
        words: list[Word] = self._text.feed_text(k, "".join(texts)) \
            if self.ready.transcript else []
        self._k, self._asked = k + 1, False
        return StepOutput(audio, words)

    def finish(self) -> None:
        """CLOSE, wait for the server's CLOSE (``close_timeout``), close the socket. An AUDIO
        that comes before it answered no step: the trial's steps were out of step (a model
        error, as in ``_nothing_after_the_answer``)."""
        ws, self._ws = self._ws, None
        early, self._early = self._early, None
        if ws is None:
            return
        surplus = early is not None and early[0] == wire.AUDIO
        counting = not self._asked  # else the next AUDIO may be the unanswered step's answer
        try:
            ws.send(wire.frame(wire.CLOSE))
            deadline = _Deadline(self.client.close_timeout)
            while deadline.left() > 0 and not surplus:
                kind = wire.split(ws.recv(timeout=deadline.left()))[0]
                if kind == wire.CLOSE:
                    break
                surplus = kind == wire.AUDIO and self._k > 0 and counting
        except Exception as e:  # a dead or silent server must not hold the instance
            log.debug("%s: ending the trial: %s", self.client.label, type(e).__name__)
        finally:
            ws.close()
        if surplus:
            raise self._surplus(self._k - 1)


class _Deadline:
    def __init__(self, seconds: float):
        self._end = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self._end - time.monotonic())


def _broken(c: BridgeClient, e: Exception, where: str) -> ModelError:
    """A receive that failed: a dropped connection is transient, a broken message final."""
    if isinstance(e, ConnectionClosed):
        return TransientModelError(f"{c.label}: the connection dropped {where} "
                                   f"({_close_code(c, e)})")
    return ModelError(f"{c.label}: {e}, {where}")


def _close_code(c: BridgeClient, e: ConnectionClosed) -> str:
    """A close frame in words; its reason is the server's text, scrubbed."""
    if e.rcvd is None:
        return "no close frame"
    return f"close code {e.rcvd.code}" + (f": {c.scrubbed(e.rcvd.reason)}" if e.rcvd.reason
                                          else "")


# --- streaming --------------------------------------------------------------------------------

class BridgeStreaming(DuplexModel):
    """A streaming bridge (or Raon's gateway) as a ``StreamingModel``."""

    def __init__(self, client: BridgeClient, ready: wire.Ready, *,
                 error_is_transient: bool = False):
        self.client, self.ready = client, ready
        self.input_sample_rate = self.output_sample_rate = ready.sample_rate
        self.chunk_ms = client.chunk_ms
        self.name = ready.model or client.label
        self._transient = error_is_transient

    async def connect(self, info: SessionInfo) -> "BridgeStreamingSession":
        c = self.client
        err: ModelError | None = None
        try:
            ws = await ws_connect(c.trial_url(info), additional_headers=c.headers(c.key()),
                                  **c.connect_options())
        except Exception as e:
            err = c.connect_failed(e)
        if err is not None:  # raised outside the except that holds the handshake's error
            raise err
        try:
            try:
                with admitting():  # a server busy with other trials holds READY back
                    kind, payload = _received(c, await asyncio.wait_for(ws.recv(),
                                                                        c.ready_timeout))
            except asyncio.TimeoutError:
                err = TransientModelError(f"{c.label}: no READY within {c.ready_timeout:g} s "
                                          "(ready_timeout)")
            except (ConnectionClosed, wire.ProtocolError) as e:
                err = _broken(c, e, "waiting for READY")
            if err is not None:
                raise err
            _same_ready(c, self.ready, _ready_of(c, kind, payload, transient=self._transient))
        except BaseException:
            await ws.close()
            raise
        return BridgeStreamingSession(ws, self)


class BridgeStreamingSession(DuplexSocketSession):
    """The ``StreamingSession`` protocol over one bridge connection.

    Items: the protocol has no turns, so the session makes them from the text: consecutive
    AUDIO messages whose TEXT continues one word are one item (its words spread over that
    audio by the playback layer), a TEXT that starts with whitespace starts the next item, and
    AUDIO without TEXT goes to a textless item. Words are then timed as in stepped mode, by the
    audio they arrive with, on the playback clock."""

    def __init__(self, ws: Any, model: BridgeStreaming):
        self._ws, self._model, self._client = ws, model, model.client
        self._chunks = Chunker(model.ready.frame)
        self._texts: list[str] = []
        self._items = 0
        self._item: str | None = None      # the item taking audio now
        self._speaking = False             # it carries text (a word may continue)
        self._closed = False
        self._text_bytes = 0  # TEXT since the last AUDIO (wire.MAX_TEXT)
        self._opened = time.monotonic()
        self.usage: dict[str, float] = {"audio_in_s": 0.0, "audio_out_s": 0.0}

    async def send(self, pcm: np.ndarray) -> None:
        """Collect the wall-clock pieces; each whole READY frame goes out when it is due."""
        for chunk in self._chunks.push(pcm):
            why = None
            try:
                await self._ws.send(wire.audio(chunk))
            except ConnectionClosed as e:
                why = _close_code(self._client, e)
            if why is not None:
                raise TransientModelError(f"{self._client.label}: the connection dropped "
                                          f"mid-instance ({why})")
            self.usage["audio_in_s"] += len(chunk) / self._model.input_sample_rate

    async def events(self) -> AsyncIterator[Event]:
        c = self._client
        while True:
            failed: ModelError | None = None
            try:
                kind, payload = _received(c, await self._ws.recv())
            except (ConnectionClosed, wire.ProtocolError) as e:
                if self._closed and isinstance(e, ConnectionClosed):
                    return
                failed = _broken(c, e, "mid-instance")
            if failed is not None:  # outside the except: its exception holds the raw reason
                raise failed
            if kind == wire.AUDIO:
                try:
                    audio = wire.pcm(payload)
                except wire.ProtocolError as e:
                    raise ModelError(f"{c.label}: {e}") from None
                self._ahead_check(len(audio))
                for ev in self._audio(audio):
                    yield ev
            elif kind == wire.TEXT:
                self._text_bytes += len(payload)
                if self._text_bytes > wire.MAX_TEXT:
                    raise ModelError(f"{c.label}: more than {wire.MAX_TEXT} bytes of TEXT "
                                     "before one AUDIO (the bound per AUDIO)")
                if self._model.ready.transcript:
                    self._texts.append(wire.utf8(payload))
            elif kind == wire.PING:
                try:
                    await self._ws.send(wire.frame(wire.PONG, payload))
                except ConnectionClosed:  # what the server sent before closing still counts
                    pass
            elif kind == wire.ERROR:
                cls = TransientModelError if self._model._transient else ModelError
                raise cls(f"{c.label}: the server reported an error: {c.scrubbed(payload)}")
            elif kind == wire.CLOSE:
                if self._closed:
                    return
                reason = f" ({c.scrubbed(payload)})" if payload else ""
                cls = TransientModelError if self._model._transient else ModelError
                raise cls(f"{c.label}: the server ended the trial before its end "
                          f"(CLOSE){reason}")
            # PONG, READY again, traces: nothing to hear

    def _ahead_check(self, samples: int) -> None:
        """A server may send its audio ahead of real time, but not without bound: what it sent
        may run at most ``MAX_AHEAD_S`` ahead of the wall clock since READY (memory)."""
        ahead = (self.usage["audio_out_s"] + samples / self._model.output_sample_rate
                 - (time.monotonic() - self._opened))
        if ahead > MAX_AHEAD_S:
            raise ModelError(f"{self._client.label}: the server sent audio more than "
                             f"{MAX_AHEAD_S:g} s ahead of real time (the bound on buffered "
                             "audio)")

    def _audio(self, audio: np.ndarray) -> list[Event]:
        out: list[Event] = []
        text, self._texts = "".join(self._texts), []
        self._text_bytes = 0
        self.usage["audio_out_s"] += len(audio) / self._model.output_sample_rate
        new_word = bool(text) and (not self._speaking or text[0].isspace())
        if self._item is not None and (new_word or (self._speaking and not text)):
            out.append(ItemDone(self._item))
            self._item = None
        if self._item is None:
            self._items += 1
            self._item = f"bridge_{self._items}"
        self._speaking = bool(text)
        if text:
            out.append(TranscriptDelta(self._item, text))
        out.append(AudioDelta(self._item, audio))
        if text and text[-1].isspace():  # the word ends with this audio
            out.append(ItemDone(self._item))
            self._item, self._speaking = None, False
        return out

    async def _close(self) -> None:
        """CLOSE, drain up to the server's CLOSE, close the socket (``close_timeout`` each)."""
        c = self._client
        await stop_and_close(self._ws, wire.frame(wire.CLOSE),
                             lambda m: wire.split(m)[0] == wire.CLOSE, c.close_timeout,
                             c.label)


# --- the factory ------------------------------------------------------------------------------

_OWN = {f.name: f for f in fields(BridgeClient) if f.name not in ("server_options", "label",
                                                                   "key_env")}


def client_from(options: dict[str, Any]) -> BridgeClient:
    """The client's options converted; the rest are the server's (query parameters)."""
    if "api_key" in options:
        raise ModelConfigError(f"{LABEL}: do not pass the API key as an option; set {KEY_ENV} "
                               "in the environment")
    own = {k: coerce(LABEL, _OWN[k], v) for k, v in options.items() if k in _OWN}
    rest = {k: str(v) for k, v in options.items() if k not in _OWN}
    if "url" not in own and meant(rest):  # the one option the client cannot run without
        raise ModelConfigError(f"{LABEL}: no url option{meant(rest)}")
    reserved = sorted(set(rest) & set(wire.RESERVED_PARAMS))
    if reserved:
        raise ModelConfigError(f"{LABEL}: {', '.join(reserved)} is set by the client for "
                               "every trial, not an option")
    return BridgeClient(**own, server_options=rest)


def meant(server_options: dict[str, str], refusal: str | None = None) -> str:
    """``; unknown option 'ulr' (did you mean 'url'?)`` for a server option whose name is
    close to one of the client's own (a typo sends it to the server), else ``""``; with the
    server's ``refusal``, only for an option it names."""
    for key in server_options:
        if refusal is not None and key not in refusal:
            continue
        close = difflib.get_close_matches(key, list(_OWN), n=1)
        if close:
            return f"; unknown option {key!r} (did you mean {close[0]!r}?)"
    return ""


# READY of the run's preflight probe, taken once by the model's build in the same process (a
# serial run connects once before its first trial, not twice)
_PROBED: dict[tuple, wire.Ready] = {}


def _probe_key(client: BridgeClient) -> tuple:
    return client.url, tuple(sorted(client.server_options.items()))


def model_for(client: BridgeClient, *, error_is_transient: bool = False):
    ready = _PROBED.pop(_probe_key(client), None) or probe(client)
    if ready.mode == "stepped":
        return BridgeStepped(client, ready)
    return BridgeStreaming(client, ready, error_is_transient=error_is_transient)


def factory(**options: Any):
    """``--duplexact-model=bridge``: probe the server, return its stepped or streaming model."""
    return model_for(client_from(options))


def preflight(**options: Any) -> None:
    """Options, URL and the key rule, without connecting."""
    client_from(options)


def reach(**options: Any) -> str:
    """``duplexact models bridge --option url=...``: what answers at the URL now."""
    return probed(**options).description


def probed(**options: Any) -> Probed:
    """The run's preflight (pytest_plugin/preflight.py): connect once; what answers, its
    name and how many trials it serves at once."""
    return probed_as(probe(client := client_from(options)), client, "a bridge")


def probed_as(r: wire.Ready, client: BridgeClient, unnamed: str) -> Probed:
    _PROBED[_probe_key(client)] = r
    return Probed(described(r, unnamed), r.model, r.max_sessions, shown_url(client.url),
                  mode=r.mode)


def described(r: wire.Ready, unnamed: str) -> str:
    """What a probe learnt, as ``reach`` says it (``unnamed``: a READY without a model name)."""
    at_once = "" if r.max_sessions is None else f", {r.max_sessions} trial(s) at once"
    return (f"{r.model or unnamed}: {r.mode}, {r.sample_rate} Hz, {r.frame}-sample frames, "
            f"transcript {'yes' if r.transcript else 'no'}{at_once}")


factory = Adapter(factory, preflight=preflight, reach=reach, probe=probed)
