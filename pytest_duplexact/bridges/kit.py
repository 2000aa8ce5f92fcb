"""The bridge server kit: serve one model over the duplexact bridge protocol v1.

Runs in the *model's* environment and imports only the standard library, numpy and
``websockets``. The contract a model bridge implements is in ``bridges/__init__.py``; this
module is the loop around it:

* one WebSocket connection = one trial: the query string's options go to ``model.open``,
  whose session is the trial's whole state; ``session.close()`` always runs at the end, so
  no state leaks into the next trial;
* the model's calls (``open``, ``step``, ``close``) run one at a time in one worker thread
  (one model, one device), so the event loop keeps answering PINGs and queueing the next
  connection while a step computes; at most ``model.max_sessions`` trials run at once (default
  1), the others wait before their READY; a connection that waited gets its session only if
  its client still answers (a WebSocket ping), and a trial whose client sends nothing for
  ``input_timeout`` seconds ends with ERROR, so one idle or vanished client cannot hold a slot;
* a model exception becomes an ERROR message (the client scores the trial as a model error)
  and a traceback in the server's log; one log line per trial says who, how long, how it
  ended;
* the model's optional ``warmup()`` runs once, in that worker thread, before the port is
  bound (``BridgeServer.start``; ``--no-warmup`` skips it): READY then means ready, and the
  first trial's step 0 is not a cold compile. Its duration is logged and kept in
  ``BridgeServer.warmup_s``.

Batched stepping plugs in at ``Stepper``: every step goes through ``stepper.step(session,
frame)``, and ``BridgeServer.sessions`` holds the open trials; for a stepped model with
``step_batch`` the server uses ``BatchStepper`` (end of this module), which gathers one frame
from each open session per tick and calls ``step_batch`` once.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import hmac
import logging
import os
import queue
import signal
import socket
import ssl as ssl_module
import sys
import threading
import time
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Callable, Protocol, Sequence, runtime_checkable
from urllib.parse import parse_qsl, urlsplit

import numpy as np
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from . import wire

log = logging.getLogger("pytest_duplexact.bridges")

KEY_ENV = "DUPLEXACT_BRIDGE_API_KEY"  # when set on the server, clients must send it (Bearer)
DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8765
# The longest a trial waits for its client's next message (READY to the first frame, between
# frames): the client's own step timeout (wire.STEP_TIMEOUT_S). A streaming client sends a
# chunk every few tens of ms; a stepped one computes between steps for a few seconds at most
# (the LLM simulator's two 10 s attempts included); one silent for longer has given up.
INPUT_TIMEOUT_S = wire.STEP_TIMEOUT_S
ALIVE_TIMEOUT_S = 5.0  # a queued connection's ping must be answered within this


@dataclass(frozen=True)
class Trial:
    """Who a connection is: the benchmark instance (``trial_id``, for logs; may be empty), the
    run's seed (``run_seed``; seed the model's sampling from it) and the peer address."""

    id: str = ""
    seed: int = 0
    peer: str = ""


class BridgeModel:
    """A bridge model's contract (``bridges/__init__.py``): what it must declare, and what it
    may leave out with its default. A model may derive from it (the package's bridges do) or
    be a plain object declaring the same: the kit reads both alike, through the protocols
    below, and takes what a plain model leaves out from here."""

    mode: str  # "stepped" or "streaming"
    sample_rate: int  # Hz of the audio both ways
    frame: int  # samples per step

    name: str = ""  # shown in READY and in the server's log ("": its class's name)
    transcript: bool = False  # step() returns the model's own words as text
    # trials at once it can serve: one unless --max-sessions asks more, and never more than
    # this (None: no cap of its own)
    max_sessions: int | None = None
    # once, in the stepping thread, before the port is bound (None: nothing to warm); a
    # method when declared, left None here so that a model without one is not timed warming
    warmup: Callable[[], None] | None = None

    def close(self) -> None:
        """The server is shutting down: free what the model holds (nothing by default)."""


# One protocol per optional declaration, for a model that does not derive from BridgeModel (a
# BridgeModel has each but a warm-up: a method set to None is not declared).

@runtime_checkable
class NamedBridge(Protocol):
    name: str


@runtime_checkable
class Transcribing(Protocol):
    transcript: bool


@runtime_checkable
class SessionCapped(Protocol):
    max_sessions: int | None


@runtime_checkable
class WarmingUp(Protocol):
    def warmup(self) -> None: ...


@runtime_checkable
class Closing(Protocol):
    def close(self) -> None: ...


@runtime_checkable
class SteppingBatch(Protocol):
    """A stepped model's ``step_batch(steps)``: one call for every open trial
    (``BatchStepper``)."""

    def step_batch(self, steps: list[tuple[Any, np.ndarray]]) -> list[Any]: ...


def own_max_sessions(model: Any) -> int | None:
    """The most trials at once ``model`` says it serves (None: no cap of its own)."""
    return model.max_sessions if isinstance(model, SessionCapped) else BridgeModel.max_sessions


class SessionEnded(Exception):
    """Raised by ``session.step`` when the model cannot go on (a token or context budget ran
    out): the kit sends CLOSE with this reason before the client's, which the plugin scores
    as a model error of the instance (the trial was cut short), never as a miss."""


class WarmupFailed(RuntimeError):
    """The model's ``warmup()`` raised: nothing is served (``main`` exits with this line)."""


class OptionError(ValueError):
    """A query option the model does not know or cannot convert: sent as ERROR."""


def typed_options(options: dict[str, str], defaults: dict[str, Any]) -> dict[str, Any]:
    """``defaults`` updated from the query options, each converted to its default's type
    (bool: true/false/1/0/yes/no); an unknown name or a bad value raises ``OptionError``."""
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        raise OptionError(f"unknown option(s) {', '.join(unknown)}; known: "
                          f"{', '.join(sorted(defaults)) or 'none'}")
    out = dict(defaults)
    for key, raw in options.items():
        kind = type(defaults[key])
        try:
            if kind is bool:
                if raw.lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError(raw)
                out[key] = raw.lower() in ("true", "1", "yes")
            elif defaults[key] is None:
                out[key] = raw
            else:
                out[key] = kind(raw)
        except ValueError:
            raise OptionError(f"option {key}: expected {kind.__name__}, got {raw!r}") from None
    return out


def answer(out: Any) -> tuple[np.ndarray, list[str]]:
    """A session's ``step`` result as (flat float32 audio, texts): it may return the audio
    alone, or ``(audio, texts)`` with texts a string or a sequence of strings."""
    texts: Any = ()
    if isinstance(out, tuple):
        if len(out) != 2:
            raise TypeError(f"step returned a tuple of {len(out)}; expected (audio, texts)")
        out, texts = out
    if isinstance(texts, str):
        texts = [texts]
    texts = [t for t in texts if t]
    for t in texts:
        if not isinstance(t, str):
            raise TypeError(f"step returned text {t!r} ({type(t).__name__}); expected str")
    return np.asarray(out, dtype=np.float32).reshape(-1), texts


class Stepper:
    """Runs the model's calls off the event loop, one at a time, in one worker thread (a
    daemon: a model stuck in a call cannot keep the server process alive at Ctrl-C). The seam
    for batched stepping (module doc)."""

    def __init__(self):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._waiting: set[asyncio.Future] = set()
        self._stopped = False
        self._thread = threading.Thread(target=self._work, name="bridge-model", daemon=True)
        self._thread.start()

    async def call(self, fn: Callable, *args: Any) -> Any:
        if self._stopped:  # the server is stopping: no new calls into the model
            raise asyncio.CancelledError()
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        self._waiting.add(done)
        done.add_done_callback(self._waiting.discard)
        self._jobs.put((fn, args, loop, done))
        return await done

    def submit(self, fn: Callable, *args: Any) -> None:
        """Queue a call nobody waits for (a session's close while the server shuts down)."""
        self._jobs.put((fn, args, None, None))

    async def step(self, session: Any, frame: np.ndarray) -> Any:
        return await self.call(session.step, frame)

    def shutdown(self) -> None:
        """Stop taking calls; whoever waits for one gets CancelledError (a stuck model's
        trial is abandoned, not waited for). Calls already submitted still run, then the
        worker ends (``finish``)."""
        self._stopped = True
        for done in list(self._waiting):
            done.cancel()

    def finish(self) -> None:
        self._jobs.put(None)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, args, loop, done = job
            try:
                result, error = fn(*args), None
            except BaseException as e:  # handed to the awaiting connection
                result, error = None, e
                if done is None:
                    log.warning("%s failed: %s: %s", getattr(fn, "__qualname__", fn),
                                type(e).__name__, e)
            if done is None:
                continue
            try:
                loop.call_soon_threadsafe(_settle, done, result, error)
            except RuntimeError:  # that connection's loop is gone
                pass


def _settle(done: asyncio.Future, result: Any, error: BaseException | None) -> None:
    if done.cancelled():
        return
    if error is not None:
        done.set_exception(error)
    else:
        done.set_result(result)


class _TrialEnd(Exception):
    """The trial ends early with ERROR (or CLOSE) ``message`` sent to the client."""

    def __init__(self, message: str, kind: int = wire.ERROR):
        super().__init__(message)
        self.kind = kind


class BridgeServer:
    """Serves ``model`` (the contract in ``bridges/__init__.py``); ``await start()`` binds and
    returns the ``ws://`` (``wss://``) URL, ``await close()`` stops."""

    def __init__(self, model: Any, *, stepper: Stepper | None = None, api_key: str | None = None,
                 ssl: ssl_module.SSLContext | None = None, max_sessions: int | None = None,
                 warmup: bool = True, input_timeout: float = INPUT_TIMEOUT_S):
        self.model = model
        # trials at once: --max-sessions, else the model's own attribute, else 1; READY says it
        sessions = max_sessions or int(own_max_sessions(model) or 1)
        self._warmup = warmup
        self.warmup_s: float | None = None  # how long the model's warm-up took (None: none)
        self.input_timeout = input_timeout
        self.ready = wire.Ready(model.mode, model.sample_rate, model.frame,
                                bool(model.transcript if isinstance(model, Transcribing)
                                     else BridgeModel.transcript),
                                str((model.name if isinstance(model, NamedBridge)
                                     else BridgeModel.name) or type(model).__name__),
                                max_sessions=sessions)
        if stepper is None:  # a model with step_batch shares each step among its trials
            stepper = BatchStepper(model, lambda: len(self.sessions)) if batched(model) \
                else Stepper()
        self.stepper = stepper
        self._key = api_key
        self._ssl = ssl
        self._slots = asyncio.Semaphore(sessions)
        self.sessions: dict[ServerConnection, Any] = {}  # the open trials (a batch stepper's)
        self.trials = 0
        self._server: Any = None
        self.url = ""

    async def start(self, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> str:
        await self._warm_up()  # before binding: no client can connect to a cold model
        self._server = await serve(self._handle, host, port, ssl=self._ssl,
                                   process_request=self._authorize, max_size=wire.MAX_MESSAGE,
                                   compression=None)
        bound = self._server.sockets[0].getsockname()
        shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
        self.url = f"{'wss' if self._ssl else 'ws'}://{shown}:{bound[1]}"
        return self.url

    async def _warm_up(self) -> None:
        """``model.warmup()`` if it has one, in the worker thread that runs its steps (the
        one whose compiled kernels, CUDA graphs and caches the trials then use)."""
        if not (self._warmup and isinstance(self.model, WarmingUp)):
            return
        started = time.monotonic()
        log.info("model %s: warming up", self.ready.model)
        try:
            await self.stepper.call(self.model.warmup)
        except Exception as e:
            log.exception("model %s: the warm-up failed", self.ready.model)
            raise WarmupFailed(f"model {self.ready.model}: the warm-up failed "
                               f"({type(e).__name__}: {e}); nothing was served") from None
        self.warmup_s = time.monotonic() - started
        log.info("model %s: warmed up in %.2f s", self.ready.model, self.warmup_s)

    async def close(self) -> None:
        """Stop: trials still stepping are abandoned (a stuck model cannot hold the server)."""
        self.stepper.shutdown()
        if self._server is not None:
            self._server.close()
            try:
                await asyncio.wait_for(self._server.wait_closed(), 5.0)
            except asyncio.TimeoutError:
                log.warning("some connections did not close within 5 s")
        self.stepper.finish()  # after the sessions' closes were submitted

    def _authorize(self, connection: ServerConnection, request: Any):
        """With a key set, the handshake needs ``Authorization: Bearer <key>`` (401 if not)."""
        if not self._key:
            return None
        sent = request.headers.get("Authorization", "")
        if hmac.compare_digest(sent.encode(), f"Bearer {self._key}".encode()):
            return None
        return connection.respond(HTTPStatus.UNAUTHORIZED, "missing or wrong bearer key\n")

    # --- one connection = one trial ---------------------------------------------------------
    async def _handle(self, ws: ServerConnection) -> None:
        started = time.monotonic()
        peer = "%s:%s" % tuple(ws.remote_address[:2]) if ws.remote_address else "?"
        stats = {"steps": 0, "samples": 0}
        ending = "ok"
        trial = Trial(peer=peer)
        try:
            trial, options = _query(ws.request.path if ws.request else "", peer)
            queued = self._slots.locked()
            async with self._slots:
                if queued and not await _alive(ws):  # it left while queued: no session
                    ending = "client left while queued"
                else:
                    ending = await self._run(ws, trial, options, stats)
        except _TrialEnd as e:
            ending = f"{'error' if e.kind == wire.ERROR else 'ended by the model'}: {e}"
            await _send_quietly(ws, wire.frame(e.kind, str(e).encode("utf-8", "replace")))
        except ConnectionClosed:
            ending = "client left mid-trial"
        except asyncio.CancelledError:
            ending = "abandoned: the server is stopping"
            raise
        finally:
            await _close_quietly(ws)
            self.trials += 1
            log.info("trial %s from %s: %s, %d steps, %.2f s of audio in %.2f s",
                     trial.id or "-", peer, ending, stats["steps"],
                     stats["samples"] / self.model.sample_rate, time.monotonic() - started)

    async def _run(self, ws: ServerConnection, trial: Trial, options: dict[str, str],
                   stats: dict[str, int]) -> str:
        try:
            session = await self.stepper.call(self.model.open, options, trial)
        except Exception as e:
            log.debug("open failed", exc_info=True)
            raise _TrialEnd(f"cannot start the trial: {type(e).__name__}: {e}") from None
        self.sessions[ws] = session
        try:
            await ws.send(self.ready.message())
            ending = await self._loop(ws, session, stats)
        finally:
            del self.sessions[ws]
            await self._close(session, trial)
        if ending == "ok":
            await _send_quietly(ws, wire.frame(wire.CLOSE))
        return ending

    async def _close(self, session: Any, trial: Trial) -> None:
        try:
            await self.stepper.call(session.close)
        except asyncio.CancelledError:  # the server is stopping: closed later, waited for never
            self.stepper.submit(session.close)
            raise
        except Exception:
            log.exception("trial %s: session.close failed", trial.id or "-")

    async def _loop(self, ws: ServerConnection, session: Any, stats: dict[str, int]) -> str:
        stepped = self.ready.mode == "stepped"
        n = self.ready.frame
        pending = np.zeros(0, dtype=np.float32)  # streaming: input short of a frame
        while True:
            try:
                kind, payload = wire.split(await asyncio.wait_for(ws.recv(),
                                                                  self.input_timeout))
                if kind == wire.AUDIO:
                    x = wire.pcm(payload)
            except wire.ProtocolError as e:
                raise _TrialEnd(str(e)) from None
            except asyncio.TimeoutError:
                raise _TrialEnd(f"no message from the client within {self.input_timeout:g} s "
                                f"(the server's --input-timeout) after step {stats['steps']}"
                                ) from None
            if kind == wire.CLOSE:
                return "ok"
            if kind == wire.PING:
                await ws.send(wire.frame(wire.PONG, payload))
            elif kind == wire.ERROR:
                return f"the client reported an error: {wire.utf8(payload)}"
            elif kind == wire.AUDIO:
                if stepped:
                    if (problem := wire.frame_problem(x, n)) is not None:
                        raise _TrialEnd(f"step {stats['steps']}: AUDIO of {problem} "
                                        f"(READY said frame={n})")
                    await self._step(ws, session, x, stats)
                    continue
                pending = np.concatenate([pending, x]) if pending.size else x
                while pending.size >= n:
                    await self._step(ws, session, pending[:n], stats)
                    pending = pending[n:]
            # PONG and unknown kinds (Raon's traces among them) are ignored

    async def _step(self, ws: ServerConnection, session: Any, frame: np.ndarray,
                    stats: dict[str, int]) -> None:
        k = stats["steps"]
        at = k * self.ready.frame_s
        try:
            audio, texts = answer(await self.stepper.step(session, frame))
        except SessionEnded as e:
            raise _TrialEnd(str(e) or "the model ended the session", kind=wire.CLOSE) from None
        except Exception as e:
            log.exception("step %d failed", k)
            raise _TrialEnd(f"model {self.ready.model} failed in step {k} at {at:.2f} s: "
                            f"{type(e).__name__}: {e}") from None
        if self.ready.mode == "stepped" and audio.size != self.ready.frame:
            raise _TrialEnd(f"model {self.ready.model} returned {audio.size} samples in step "
                            f"{k}; a stepped model returns exactly {self.ready.frame}")
        if audio.size and not np.isfinite(audio).all():
            raise _TrialEnd(f"model {self.ready.model} returned NaN or inf in step {k}")
        stats["steps"] = k + 1
        stats["samples"] += frame.size
        for t in texts:
            await ws.send(wire.text(t))
        if audio.size or self.ready.mode == "stepped":
            await ws.send(wire.audio(audio))


def _query(path: str, peer: str) -> tuple[Trial, dict[str, str]]:
    pairs = parse_qsl(urlsplit(path).query, keep_blank_values=True)
    options: dict[str, str] = {}
    for key, value in pairs:
        if key in options:
            raise _TrialEnd(f"option {key} given twice in the query string")
        options[key] = value
    trial_id = options.pop(wire.TRIAL_PARAM, "")
    seed = options.pop(wire.SEED_PARAM, "0")
    try:
        return Trial(trial_id, int(seed), peer), options
    except ValueError:
        raise _TrialEnd(f"{wire.SEED_PARAM} must be an integer, got {seed!r}") from None


async def _alive(ws: ServerConnection) -> bool:
    """Does the client of a connection that waited for its slot still answer a ping?"""
    try:
        await asyncio.wait_for(await ws.ping(), ALIVE_TIMEOUT_S)
    except (ConnectionClosed, asyncio.TimeoutError, RuntimeError):
        return False
    return True


async def _send_quietly(ws: ServerConnection, message: bytes) -> None:
    try:
        await ws.send(message)
    except ConnectionClosed:
        pass


async def _close_quietly(ws: ServerConnection) -> None:
    try:
        await asyncio.wait_for(ws.close(), 5.0)
    except (ConnectionClosed, asyncio.TimeoutError, OSError):
        pass


# --- python -m pytest_duplexact.bridges.<model> ----------------------------------------------

def parser(prog: str, description: str = "") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("--host", default=DEFAULT_HOST,
                   help=f"address to listen on (default {DEFAULT_HOST}: this machine only; "
                        "0.0.0.0 to accept other machines)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help=f"port (default {DEFAULT_PORT}; 0 picks a free one)")
    p.add_argument("--certfile", help="TLS certificate (PEM): serve wss:// instead of ws://")
    p.add_argument("--keyfile", help="the certificate's private key (PEM)")
    p.add_argument("--max-sessions", type=_positive, metavar="N",
                   help="trials served at once, the others wait before their READY (default: "
                        "the model's max_sessions, else 1; at most the model's max_sessions "
                        "when it has one; more than 1 only for a model whose sessions hold "
                        "all their own state); READY tells the client, which refuses a "
                        "--duplexact-batch or --duplexact-concurrency above it")
    p.add_argument("--log-level", default="info",
                   choices=("debug", "info", "warning", "error"))
    p.add_argument("--no-warmup", action="store_true",
                   help="skip the model's warm-up (then the first trial's first step pays for "
                        "compiling: it may exceed the client's step_timeout)")
    p.add_argument("--input-timeout", type=float, default=INPUT_TIMEOUT_S,
                   help=f"seconds a trial waits for its client's next message before it ends "
                        f"with ERROR (default {INPUT_TIMEOUT_S:g}): an idle client cannot hold "
                        "the model")
    return p


def main(build: Callable[[argparse.Namespace], Any], *, prog: str, description: str = "",
         add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
         argv: Sequence[str] | None = None) -> int:
    """The command line of a model bridge: parse ``--host --port --certfile --keyfile
    --max-sessions --log-level --no-warmup`` plus the bridge's own arguments
    (``add_arguments``), build the model with ``build(args)`` (load weights here, once), run
    its ``warmup()`` (unless ``--no-warmup``) and serve it until interrupted. Prints one line,
    ``listening on ws://HOST:PORT ...``, to stdout once the port is bound (after the warm-up);
    a port it cannot bind is one line on stderr and exit status 1."""
    p = parser(prog, description)
    if add_arguments is not None:
        add_arguments(p)
    args = p.parse_args(argv)
    if not args.input_timeout > 0:
        p.error(f"--input-timeout must be positive, got {args.input_timeout:g}")
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.log_level != "debug":  # our line per trial says it; not two more per connection
        logging.getLogger("websockets").setLevel(logging.WARNING)
    context = None
    if args.certfile:
        context = ssl_module.SSLContext(ssl_module.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.certfile, args.keyfile)
    taken = _port_problem(prog, args.host, args.port)  # before minutes of loading weights
    if taken:
        print(taken, file=sys.stderr)
        return 1
    model = build(args)
    own = own_max_sessions(model)
    if args.max_sessions and own and args.max_sessions > own:
        print(f"{prog}: --max-sessions {args.max_sessions}: this model serves at most {own} "
              "trials at once (its max_sessions)", file=sys.stderr)
        return 2
    try:
        asyncio.run(_serve_forever(model, args.host, args.port, context, args.max_sessions,
                                   prog, warmup=not args.no_warmup,
                                   input_timeout=args.input_timeout))
    except KeyboardInterrupt:
        pass
    except _CannotListen as e:
        print(e, file=sys.stderr)
        return 1
    except WarmupFailed as e:
        raise SystemExit(str(e)) from None
    return 0


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return n


class _CannotListen(Exception):
    """The port could not be bound: one line for the user, no traceback."""


def _listen_problem(prog: str, host: str, port: int, e: OSError) -> str:
    why = "the address is already in use (another bridge running?)" \
        if e.errno == errno.EADDRINUSE else (e.strerror or str(e))
    return (f"{prog}: cannot listen on {host}:{port}: {why}; stop what holds it, or choose "
            "another --port")


def _port_problem(prog: str, host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be bound now, or None (checked again when serving)."""
    if not port:
        return None
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        return f"{prog}: cannot listen on {host}:{port}: {e.strerror or e}"
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as s:
        if os.name != "nt":  # as asyncio's server binds: a port in TIME_WAIT is free
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(address)
        except OSError as e:
            return _listen_problem(prog, host, port, e)
    return None


async def _serve_forever(model: Any, host: str, port: int,
                         context: ssl_module.SSLContext | None,
                         max_sessions: int | None = None, prog: str = "bridge", *,
                         warmup: bool = True, input_timeout: float = INPUT_TIMEOUT_S) -> None:
    server = BridgeServer(model, api_key=os.environ.get(KEY_ENV) or None, ssl=context,
                          max_sessions=max_sessions, warmup=warmup, input_timeout=input_timeout)
    try:
        url = await server.start(host, port)  # after the model's warm-up
    except OSError as e:  # taken since the check above
        server.stepper.shutdown()
        server.stepper.finish()
        raise _CannotListen(_listen_problem(prog, host, port, e)) from None
    r = server.ready
    print(f"listening on {url} (model {r.model}: {r.mode}, {r.sample_rate} Hz, {r.frame}-sample "
          f"frames, transcript {'yes' if r.transcript else 'no'}, {r.max_sessions} trial(s) at "
          f"once{', bearer key required' if server._key else ''})", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # not the main thread, or Windows
            pass
    try:
        await stop.wait()
    finally:
        await server.close()
        if isinstance(model, Closing):
            model.close()


# --- batched stepping ---------------------------------------------------------------------
# Batched stepping behind a bridge: one model call per tick for every open trial.
#
# A stepped bridge model that offers ``step_batch(steps)`` (``steps``: a list of
# ``(session, frame)``, one per trial; the answer: a list in the same order of what each
# ``session.step`` would return, or an Exception for a trial that failed alone) is stepped by
# ``BatchStepper``: each connection's frame waits until every open trial has sent its own, then
# all go to the model in one call. A trial whose client is slow to send does not hold the
# others for long: after ``gather_s`` the frames that are there go without it. Combined with
# ``max_sessions = B`` (trials at once), B clients (``--duplexact-batch=B`` of one pytest process,
# or B processes) share each step. Only the model's output must not depend on which trials share
# a call (the slots of its batch are independent).

GATHER_S = 0.05  # how long a tick waits for a trial that has not sent its frame yet


def batched(model: Any) -> bool:
    return model.mode == "stepped" and isinstance(model, SteppingBatch)


class BatchStepper(Stepper):
    """``Stepper`` whose steps are gathered into ``model.step_batch`` calls; ``open_trials()``
    counts the trials that will send a frame (``len(BridgeServer.sessions)``)."""

    def __init__(self, model: Any, open_trials: Callable[[], int], gather_s: float = GATHER_S):
        super().__init__()
        self.model, self.open_trials, self.gather_s = model, open_trials, gather_s
        self._pending: list[tuple[Any, np.ndarray, asyncio.Future]] = []
        self._timer: asyncio.TimerHandle | None = None
        self.calls: list[int] = []  # trials per model call (the log's and the tests')

    async def step(self, session: Any, frame: np.ndarray) -> Any:
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        self._pending.append((session, frame, done))
        if len(self._pending) >= self.open_trials():
            self._flush()
        elif self._timer is None:
            self._timer = loop.call_later(self.gather_s, self._flush)
        return await done

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._pending = self._pending, []
        if not batch:
            return
        self.calls.append(len(batch))
        call = asyncio.ensure_future(self.call(self.model.step_batch,
                                               [(s, f) for s, f, _ in batch]))
        call.add_done_callback(lambda c: _hand_out(c, batch))

    def shutdown(self) -> None:
        for _, _, done in self._pending:
            done.cancel()
        self._pending = []
        super().shutdown()


def _hand_out(call: asyncio.Future, batch: list) -> None:
    """Each trial's answer to its own step: one failed trial fails alone; a call that raised
    (or answered for the wrong number of trials) fails every trial in it."""
    futures = [done for _, _, done in batch]
    if call.cancelled():
        answers: Any = asyncio.CancelledError()
    elif call.exception() is not None:
        answers = call.exception()
    else:
        answers = call.result()
        if not isinstance(answers, (list, tuple)) or len(answers) != len(batch):
            answers = RuntimeError(f"step_batch answered {type(answers).__name__} "
                                   f"{len(answers) if isinstance(answers, (list, tuple)) else ''}"
                                   f" for {len(batch)} trials; expected a list, one answer each")
    for k, done in enumerate(futures):
        if done.done():
            continue
        one = answers if isinstance(answers, BaseException) else answers[k]
        if isinstance(one, BaseException):
            done.set_exception(one)
        else:
            done.set_result(one)
