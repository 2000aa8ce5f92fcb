"""The streaming duplex: hosted realtime models on the wall clock (docs/writing-an-adapter.md).

A ``StreamingModel`` adapter only speaks its provider's protocol (the contract:
models/streaming_contract.py); everything about *time* lives here, once, for every hosted model:

* ``StreamingDuplex`` implements the pipelines' ``Duplex`` for a streaming session. t = 0 is
  the instant the first input sample is sent; input goes out in small chunks on an absolute
  wall-clock schedule (chunk k at t0 + k * chunk, so lateness never accumulates).
* ``PlaybackBuffer`` turns output that arrives faster than real time into what a listener
  hears: each delta plays at 1x from its arrival, behind whatever is still playing. A barge-in
  stops playback at that instant and drops the rest, and the adapter is told how much of each
  item was actually played (``truncate``), as the providers' reference clients do.
* The native transcript is aligned to that playback (never ahead of it), and every scored time
  comes from the playback timeline, never from provider event times.
* ``run_with_retry`` runs one trial again from scratch after a transient failure (rate
  limit, refused or dropped connection).

Many instances at once: --duplexact-concurrency (prefetch.py).
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Sequence, TypeVar

import numpy as np

from ..data.audio import SAMPLE_RATE, resample
from ..data.recording import Recording
from ..data.timeline import Word
from ..models.adapter import traits
from ..models.contract import ModelError, SessionInfo, StreamingModel
from ..models.streaming_contract import (
    ADMISSION,
    DEFAULT_CHUNK_MS,
    AudioDelta,
    Error,
    Event,
    ItemDone,
    Note,
    ReportsPlayback,
    ReportsUsage,
    ResponseDone,
    ServerUnreachable,
    SpeechStarted,
    StreamingSession,
    TranscriptDelta,
    TransientModelError,
)
from ..models.util.pcm import pcm16_array
from ..remote.netsafety import ReceivedText, scrub_received
from ..remote.retry import STREAMING, RetryPolicy
from . import clock, watchdog
from .clock import Lateness, LoopMonitor
from .duplex import Duplex, Track
from .output_check import dtype_problem, level_problem
from .pacing import Pacer
from .stepped import StreamResampler

log = logging.getLogger(__name__)

# --- playback ----------------------------------------------------------------------------

# A session may queue its audio ahead of the clock (a turn-based server sends a whole answer
# at once), but not without end: a server that floods would grow the track by gigabytes.
# Past these the instance is a model error naming the bound (far beyond any real answer).
MAX_QUEUED_S = 600.0      # seconds of audio queued ahead of its arrival
MAX_ITEM_TEXT = 64 * 1024  # characters of one item's transcript

_TOKEN = re.compile(r"\S+")


@dataclass
class _Item:
    """One output item's audio as placed on the playback track, and its text."""

    id: str
    placements: list[tuple[int, int, int]] = field(default_factory=list)  # (item_off, pos, n)
    received: int = 0      # samples received, including any dropped after a barge-in
    played: int | None = None  # samples actually played when cut short; None = not cut
    received_text: ReceivedText = field(default_factory=ReceivedText)
    done: bool = False

    @property
    def text(self) -> str:
        """Its transcript so far, scrubbed as a whole (``ReceivedText``)."""
        return self.received_text.text

    @property
    def placed(self) -> int:
        return sum(n for _, _, n in self.placements)

    def position(self, sample: float, *, end: bool) -> int | None:
        """Track index of an item sample position (``end``: the position just after it)."""
        for off, pos, n in self.placements:
            if end and off < sample <= off + n:
                return pos + int(np.ceil(sample - off - 1e-9))
            if not end and off <= sample < off + n:
                return pos + int(np.floor(sample - off + 1e-9))
        return None


class PlaybackBuffer:
    """What a listener hears, on the input clock, at the model's output rate.

    Pure bookkeeping: every method takes the instant (seconds on the input clock) explicitly,
    so it is tested without a wall clock. Audio arriving while earlier audio is still playing
    is queued behind it; audio arriving after playback ran dry starts at its arrival.
    """

    def __init__(self, sample_rate: int):
        self.sample_rate = sample_rate
        self._track = np.zeros(sample_rate * 4, dtype=np.float32)
        self._end = 0  # track index where queued audio runs out
        self._items: dict[str, _Item] = {}

    def _index(self, t: float) -> int:
        return max(0, int(round(t * self.sample_rate)))

    def _item(self, item_id: str) -> _Item:
        if item_id not in self._items:
            self._items[item_id] = _Item(item_id)
        return self._items[item_id]

    def add_audio(self, at: float, item_id: str, samples: np.ndarray) -> None:
        item = self._item(item_id)
        n = len(samples)
        offset = item.received
        item.received += n
        if item.played is not None or n == 0:
            return  # generated before the barge-in, arrived after it: never heard
        start = max(self._index(at), self._end)
        stop = start + n
        if stop - self._index(at) > MAX_QUEUED_S * self.sample_rate:
            raise ModelError(f"the session queued more than {MAX_QUEUED_S:g} s of audio ahead "
                             f"of the clock at t={at:.2f}s (the bound is MAX_QUEUED_S in "
                             "pipelines/streaming_duplex.py): a server flooding audio?")
        if stop > len(self._track):
            grown = np.zeros(max(stop, 2 * len(self._track)), dtype=np.float32)
            grown[: len(self._track)] = self._track
            self._track = grown
        self._track[start:stop] = samples
        self._end = stop
        item.placements.append((offset, start, n))

    def add_text(self, item_id: str, text: str) -> None:
        item = self._item(item_id)
        if len(item.received_text) + len(text) > MAX_ITEM_TEXT:
            raise ModelError(f"the session sent more than {MAX_ITEM_TEXT} characters of text "
                             f"for one item ({item_id[:40]!r}; the bound is MAX_ITEM_TEXT in "
                             "pipelines/streaming_duplex.py)")
        item.received_text.add(text)  # joined, then scrubbed: a key split across deltas

    def finish(self, item_id: str | None = None) -> None:
        """Mark one item (or, with None, every item so far) complete."""
        for item in ([self._items[item_id]] if item_id in self._items else
                     [] if item_id is not None else self._items.values()):
            item.done = True

    def played(self, item_id: str, at: float) -> int:
        """Samples of ``item_id`` a listener has heard by ``at`` (0 for an unknown item)."""
        item = self._items.get(item_id)
        if item is None:
            return 0
        upto = self._index(at)
        return sum(min(n, max(0, upto - pos)) for _, pos, n in item.placements)

    def playing(self, at: float) -> bool:
        return self._index(at) < self._end

    def interrupt(self, at: float) -> list[tuple[str, int]]:
        """Stop playback at ``at`` and drop everything queued after it.

        Returns (item_id, audio_end_ms) for every item whose audio was cut: the milliseconds of
        it actually played, the value a client sends the provider to truncate the item."""
        cut_at = self._index(at)
        cut: list[tuple[str, int]] = []
        for item in self._items.values():
            if item.played is not None or not item.placements:
                continue
            finished = all(pos + n <= cut_at for _, pos, n in item.placements)
            if finished and item.done:
                continue  # played to its end before the barge-in
            # Either cut mid-playback, or played dry while still being generated: the provider
            # cancels it, and whatever of it arrives later is never heard.
            played = sum(min(n, max(0, cut_at - pos)) for _, pos, n in item.placements)
            item.placements = [(off, pos, min(n, cut_at - pos))
                               for off, pos, n in item.placements if pos < cut_at]
            item.played = played
            cut.append((item.id, played * 1000 // self.sample_rate))
        if cut_at < self._end:
            self._track[cut_at: self._end] = 0.0
            self._end = cut_at
        return cut

    def audio(self, until: float, since: float = 0.0) -> np.ndarray:
        """The heard output over [since, until), at the model's output rate."""
        return self.samples(self._index(since), self._index(until))

    def samples(self, start: int, stop: int) -> np.ndarray:
        """Track samples [start, stop) (output-rate indices), zeros past what was placed."""
        out = np.zeros(max(0, stop - start), dtype=np.float32)
        m = min(stop, len(self._track))
        if m > start:
            out[: m - start] = self._track[start:m]
        return out

    def words(self, until: float, *, final: bool = False) -> list[Word]:
        """Transcript words whose audio has finished playing by ``until``.

        A delta's text is spread over its item's audio in proportion to characters. Until an
        item is complete its total length is unknown and any placement would be a guess that
        could run ahead of playback, so its words appear only once it is done (``final``
        treats every item as done, for the closing Recording). Words whose audio was never
        played (cut by a barge-in) never appear."""
        sr = self.sample_rate
        limit = self._index(until)
        words: list[Word] = []
        for item in self._items.values():
            if not (item.done or final) or not len(item.received_text) or item.received == 0:
                continue
            text = item.text
            total_chars = len(text)
            heard = item.played if item.played is not None else item.placed
            for m in _TOKEN.finditer(text):
                s = m.start() / total_chars * item.received
                e = m.end() / total_chars * item.received
                if e > heard + 1e-6:
                    continue
                start, end = item.position(s, end=False), item.position(e, end=True)
                if start is None or end is None or end > limit:
                    continue
                words.append(Word(start / sr, end / sr, m.group()))
        words.sort(key=lambda w: (w.start, w.end))
        return words


# --- the Duplex on the wall clock --------------------------------------------------------

@dataclass(frozen=True)
class _Ahead:
    """Announced input to resample once (``_InputResampler.plan``): from input index ``at``,
    with the left context from index ``first``; ``signal`` is that context then
    ``upcoming``."""

    at: int
    first: int
    upcoming: np.ndarray
    signal: np.ndarray


class _InputResampler:
    """16 kHz -> model rate for consecutive pushes, as if the signal were resampled whole.

    A band-limited filter needs a little of the future: each call resamples everything but
    the last ``LOOKAHEAD`` input samples (4 ms), with the earlier input as left context, and
    the held-back samples go out with the next push. Without that, every push boundary
    would carry a click (~45 dB SNR with 20-40 ms pushes; >100 dB with it). Output counts
    follow the cumulative input, so no rounding drift builds up.

    A one-shot resample costs the same whether it is given 40 ms or 40 s (most of it is the
    filter's setup), so the input the pipeline is about to push (``expect``: a prerecorded
    clip, the observation's silence) is resampled once, with the same left context; pushes
    that carry it are served from that output, any other push takes the path above."""

    LOOKAHEAD = 64
    CONTEXT = 640

    def __init__(self, to_rate: int):
        self.to_rate = to_rate
        self.lag = 0 if to_rate == SAMPLE_RATE else self.LOOKAHEAD
        # the left context starts where an input sample falls on an output sample, so the
        # context's output grid is the signal's (no sub-sample shift at a 22.05 kHz rate)
        self._align = SAMPLE_RATE // math.gcd(SAMPLE_RATE, to_rate)
        self.emitted = 0   # input index up to which output has been produced
        self._total = 0    # input samples received
        self._recent = np.zeros(0, dtype=np.float32)  # input ending at _total
        # the expected input resampled ahead: (its input index, its samples, output from
        # input index ``_ahead_first``), and how much of it the pushes have carried
        self._ahead: tuple[int, np.ndarray, np.ndarray] | None = None
        self._ahead_first = 0
        self._ahead_used = 0

    def out_index(self, k: int) -> int:
        return int(round(k * self.to_rate / SAMPLE_RATE))

    def _context_start(self) -> int:
        start = max(0, self.emitted - self.CONTEXT)
        return start - start % self._align

    def expect(self, upcoming: np.ndarray) -> None:
        """The next pushes will most likely carry ``upcoming``: resample it now, once."""
        plan = self.plan(upcoming)
        if plan is not None:
            self.adopt(plan, resample(plan.signal, SAMPLE_RATE, self.to_rate))

    def plan(self, upcoming: np.ndarray) -> "_Ahead | None":
        """``expect``'s first half: what to resample (``signal``: the left context, then
        ``upcoming``), or None when there is nothing to; the resampling itself may run on
        another thread (soxr releases the GIL) before ``adopt`` takes its output."""
        self._settle()
        if self.lag == 0 or len(upcoming) == 0:
            return None
        first = self._context_start()
        known = self._recent[len(self._recent) - (self._total - first):]
        upcoming = np.asarray(upcoming, dtype=np.float32)
        return _Ahead(self._total, first, upcoming, np.concatenate([known, upcoming]))

    def adopt(self, plan: "_Ahead", y: np.ndarray) -> None:
        """``expect``'s second half: serve the pushes from ``y``, ``plan.signal`` resampled,
        unless input was pushed since ``plan`` (those took the push-by-push path)."""
        if plan.at != self._total or self._ahead is not None:
            return
        self._ahead = (plan.at, plan.upcoming, y)
        self._ahead_first, self._ahead_used = plan.first, 0

    def _settle(self) -> None:
        """Leave the expected input: what of it was pushed becomes the recent input."""
        if self._ahead is None:
            return
        at, upcoming, _ = self._ahead
        used = upcoming[: self._ahead_used]
        keep = self._total - self._context_start()
        self._recent = np.concatenate([self._recent, used])[-keep:] if keep else \
            np.zeros(0, np.float32)
        self._ahead = None

    def _from_ahead(self, block: np.ndarray) -> np.ndarray | None:
        if self._ahead is None:
            return None
        at, upcoming, y = self._ahead
        pos = self._ahead_used
        if at + pos != self._total or not np.array_equal(block, upcoming[pos: pos + len(block)]):
            return None
        self._total += len(block)
        self._ahead_used += len(block)
        upto = max(self.emitted, self._total - self.lag)
        base = self.out_index(self._ahead_first)
        piece = self._padded(y, self.out_index(self.emitted) - base, self.out_index(upto) - base)
        self.emitted = upto
        return piece

    @staticmethod
    def _padded(y: np.ndarray, a: int, b: int) -> np.ndarray:
        piece = y[a:b]
        if len(piece) < b - a:
            piece = np.concatenate([piece, np.zeros(b - a - len(piece), np.float32)])
        return piece

    def __call__(self, block: np.ndarray) -> np.ndarray:
        """Output for input [emitted, received - lag)."""
        if self.lag == 0:
            self._total += len(block)
            self.emitted = self._total
            return block
        piece = self._from_ahead(block)
        if piece is not None:
            return piece
        self._settle()
        self._recent = np.concatenate([self._recent, block])
        self._total += len(block)
        upto = max(self.emitted, self._total - self.lag)
        first = self._context_start()
        y = resample(self._recent[len(self._recent) - (self._total - first):], SAMPLE_RATE,
                     self.to_rate)
        piece = self._padded(y, self.out_index(self.emitted) - self.out_index(first),
                             self.out_index(upto) - self.out_index(first))
        self.emitted = upto
        keep = self._total - self._context_start()
        self._recent = self._recent[len(self._recent) - keep:]
        return piece


def _checked_audio(audio: Any, at: float) -> np.ndarray:
    """An AudioDelta's samples, or a ModelError (final, not retried: a retry of a model that
    sends broken audio sends it again) for non-mono, non-float, non-finite or absurd audio."""
    raw = np.asarray(audio)
    problem = dtype_problem(raw)
    if problem is None and raw.ndim != 1:
        problem = f"audio of shape {raw.shape}; mono (1-D) expected"
    x = raw.astype(np.float32, copy=False) if problem is None else None
    problem = problem or level_problem(x)
    if problem is not None:
        raise ModelError(f"the session sent {problem}, at t={at:.2f}s")
    return x


def _beside_send(session: Any, name: str) -> Any:
    """``session.<name>`` (``send_nowait``, ``input_pcm16``) when it belongs to the session's
    own ``send``: set on the instance, or defined by the class that defines ``send`` or by a
    subclass of it. None otherwise: a wrapper that forwards attributes (``__getattr__``) or
    a subclass that overrides ``send`` below them must see every chunk through its own
    ``send``, as floats (and a mock's invented attributes are not a fast path)."""
    own = getattr(session, "__dict__", {})
    if name in own:
        return own[name]
    if "send" in own:
        return None
    mro = type(session).__mro__

    def defined_at(attr: str) -> int | None:
        return next((i for i, k in enumerate(mro) if attr in vars(k)), None)

    at, send_at = defined_at(name), defined_at("send")
    if at is None or send_at is None or at > send_at:
        return None
    value = vars(mro[at])[name]  # as attribute lookup would find it: a method comes bound
    bind = getattr(type(value), "__get__", None)
    return bind(value, session, type(session)) if bind is not None else value


@dataclass
class _Feed:
    """One push on its way out: its 16 kHz input ``x``, that input at the session's rate
    ``y`` (from input index ``first``, output index ``origin``), ``base``: the input sample
    ``x`` starts at; ``i`` of ``x`` and ``done`` of ``y`` sent so far."""

    x: np.ndarray
    y: np.ndarray
    base: int
    first: int
    origin: int
    i: int = 0
    done: int = 0


class _ClockedSend:
    """``StreamingDuplex._clocked``'s chunks on their way out. An object, not a closure:
    a closure that schedules itself is a reference cycle, garbage for the collector (whose
    full collections stall every live session: run/live_gc.py) once per push."""

    __slots__ = ("duplex", "feed", "fut", "slot")

    def __init__(self, duplex: "StreamingDuplex", feed: _Feed):
        self.duplex, self.feed = duplex, feed
        self.fut = duplex._loop.create_future()
        self.slot = duplex._slot0 + feed.base + feed.i  # the slot the next tick waits on
        duplex._pacer.call_at_slot(self.slot, self.tick)
        self.fut.add_done_callback(self._forget)

    def _forget(self, fut: asyncio.Future) -> None:
        if fut.cancelled():  # the push was cancelled: its next tick must not keep it alive
            self.duplex._pacer.forget(self.slot, self.tick)

    def tick(self) -> None:
        d, feed, fut = self.duplex, self.feed, self.fut
        if fut.done():  # the push was cancelled (its trial stopped)
            return
        try:
            piece = d._due_piece(feed)
            try:
                took = d._send_nowait(piece)
            except ModelError as e:
                d._fail(e)
            except Exception as e:  # the adapter let a transport error through
                d._fail(TransientModelError(f"sending input failed: {type(e).__name__}: {e}"))
            d._check()
        except Exception as e:  # the task raises it: the clock must go on for the others
            fut.set_exception(e)
            return
        if not took:
            fut.set_result(piece)
            return
        try:
            d._watch.beats += 1
            d._sent_chunk(feed)
            if feed.i >= len(feed.x):
                fut.set_result(None)
                return
            self.slot = d._slot0 + feed.base + feed.i
            d._pacer.call_at_slot(self.slot, self.tick)
        except Exception as e:  # never a push left waiting on a tick that will not come
            fut.set_exception(e)


class StreamingDuplex(Duplex):
    """``Duplex`` for a streaming session, on the wall clock (see the module docstring)."""

    streams_pushes = True  # each chunk of a push goes out at its own slot

    def __init__(self, session: StreamingSession, *, input_sample_rate: int,
                 output_sample_rate: int, chunk_ms: float = DEFAULT_CHUNK_MS):
        if chunk_ms <= 0:
            raise ValueError(f"chunk_ms must be positive, got {chunk_ms}")
        self.session = session
        # a chunk the session can write without waiting goes out from the send clock itself
        self._send_nowait = _beside_send(session, "send_nowait")
        # a session that sends 16-bit PCM is handed its chunks already as int16
        self._pcm16 = _beside_send(session, "input_pcm16") is True
        self.input_sample_rate = input_sample_rate
        self.output_sample_rate = output_sample_rate
        self.chunk = max(1, int(round(SAMPLE_RATE * chunk_ms / 1000)))
        self.events: list[tuple[float, str]] = []
        self.playback = PlaybackBuffer(output_sample_rate)
        self._to16 = StreamResampler(output_sample_rate, SAMPLE_RATE)
        self._heard16 = Track()
        self._fed = 0                  # output-rate samples fed to _to16
        self._resampler = _InputResampler(input_sample_rate)
        self._inputs: list[np.ndarray] = []
        self._sent = 0                 # 16 kHz input samples sent
        self._t0: float | None = None  # loop time of the first input sample
        self._loop = asyncio.get_running_loop()
        self._pacer = Pacer.of(self._loop)
        self._slot0 = 0                # the send clock's slot of t0
        self._failure: ModelError | None = None
        self._closing = False
        # the harness's own lateness on this trial (clock.py): input, output stamps, loop
        self.lateness = Lateness()
        self._monitor = LoopMonitor.of(self._loop)
        self._monitor.watch(self.lateness)
        self._tolerance = clock.TOLERANCE.get()  # over it, the trial stops (TrialLate)
        self._watch = watchdog.current()  # each answer from the session is progress
        self.usage: dict = {}  # the session's own usage report, taken at close()
        self.admission_s = 0.0  # waiting to be admitted before t = 0 (models.streaming_contract)
        if isinstance(session, ReportsPlayback):  # a protocol that reports playback
            session.attach_playback(self.played_ms)
        self._reader = asyncio.create_task(self._read())
        self._reader.add_done_callback(lambda _: self._monitor.unwatch(self.lateness))

    @classmethod
    async def open(cls, model: StreamingModel, info: SessionInfo,
                   chunk_ms: float | None = None) -> "StreamingDuplex":
        """Connect one session of ``model`` and wrap it. Connection failures come out as
        ``ModelError`` (``TransientModelError`` when worth retrying)."""
        admission = ADMISSION.get()
        waited = admission.seconds if admission is not None else 0.0
        try:
            session = await model.connect(info)
        except ModelError:
            raise
        except (OSError, asyncio.TimeoutError) as e:
            raise ServerUnreachable(f"could not connect: {type(e).__name__}: {e}") from e
        if chunk_ms is None:
            declared = traits(model).chunk_ms
            chunk_ms = DEFAULT_CHUNK_MS if declared is None else declared
        duplex = cls(session, input_sample_rate=model.input_sample_rate,
                     output_sample_rate=model.output_sample_rate, chunk_ms=chunk_ms)
        if admission is not None:  # the server's queue before this session: apart
            duplex.admission_s = admission.seconds - waited
        return duplex

    # -- clock --

    def _clock(self) -> float:
        """Seconds since the first input sample was sent (0 before it)."""
        if self._t0 is None:
            return 0.0
        return max(0.0, self._loop.time() - self._t0)

    @property
    def now(self) -> float:
        return self._sent / SAMPLE_RATE

    @property
    def started_at(self) -> float | None:
        """Loop time (``time.monotonic()`` for the default loop) of the first input sample."""
        return self._t0

    @property
    def max_input_lag(self) -> float:
        """Largest delay (s) of an input chunk behind its wall-clock slot so far."""
        return self.lateness.input

    def played_ms(self, item_id: str) -> int:
        """Milliseconds of ``item_id`` a listener has heard by now (the playback clock)."""
        return self.playback.played(item_id, self._clock()) * 1000 // self.output_sample_rate

    def _record(self, at: float, what: str) -> None:
        self.events.append((round(at, 4), what))

    # -- input --

    def _check(self) -> None:
        if self._failure is not None:
            raise self._failure

    def expect(self, samples: np.ndarray) -> None:
        """The next pushes will most likely carry ``samples``: resample them once, now."""
        self._resampler.expect(np.asarray(samples, dtype=np.float32))

    async def prepare(self, samples: np.ndarray) -> None:
        """``expect``, its resampling (milliseconds for a clip) in a worker thread: on this
        thread it would hold up every other live session's input and output."""
        plan = self._resampler.plan(np.asarray(samples, dtype=np.float32))
        if plan is not None:
            y = await asyncio.to_thread(resample, plan.signal, SAMPLE_RATE,
                                        self._resampler.to_rate)
            self._resampler.adopt(plan, y)

    async def read_clip(self, clip) -> np.ndarray:
        """``clip``'s samples, decoded in a worker thread (libsndfile releases the GIL), for
        the reason ``prepare`` gives."""
        return await asyncio.to_thread(clip.load)

    async def _until(self, k: int) -> None:
        """Wait for input sample ``k``'s wall-clock slot (t0 + k / 16 kHz) on the loop's one
        send clock (pacing.py)."""
        fut = self._pacer.wait(self._slot0 + k)
        if fut is None:
            # a late chunk still yields the loop: sent back to back (a send rarely suspends),
            # a catch-up would hold it, and every other session's input and output, for as
            # long as the catch-up lasts (seen: a minute under load)
            await asyncio.sleep(0)
            return
        try:
            await fut
        except asyncio.CancelledError:
            self._pacer.forget(self._slot0 + k, fut)
            raise

    async def push(self, samples: np.ndarray) -> None:
        x = np.asarray(samples, dtype=np.float32)
        if x.ndim != 1:
            raise ValueError(f"push expects mono samples, got shape {x.shape}")
        self._check()
        if self._closing:
            raise RuntimeError("push after close")
        if len(x) == 0:
            return
        first = self._resampler.emitted  # y covers input [first, _sent + len(x) - lag)
        y = self._resampler(x)
        if self._pcm16:  # the whole push converted once, not each chunk (pcm.pcm16_array)
            y = pcm16_array(y)
        feed = _Feed(x, y, self._sent, first, self._resampler.out_index(first))
        if self._t0 is None:  # t = 0 on the send clock's next grid line (pacing.py)
            self._slot0 = self._pacer.start()
            self._t0 = self._pacer.time(self._slot0)
        while feed.i < len(x):
            if self._send_nowait is not None:
                # the send clock sends the chunks itself; this task wakes only when they
                # are all out, or for a chunk the session could not take at once
                piece = await self._clocked(feed)
                if piece is None:
                    break
            else:
                await self._until(feed.base + feed.i)
                piece = self._due_piece(feed)
            try:
                await self.session.send(piece)
                self._watch.beats += 1
            except ModelError as e:
                self._fail(e)
            except Exception as e:  # the adapter let a transport error through
                self._fail(TransientModelError(f"sending input failed: {type(e).__name__}: {e}"))
            self._check()
            self._sent_chunk(feed)
        # "consumed" = the wall clock has reached the end of the pushed audio
        await self._until(self._sent)
        self._check()

    def _due_piece(self, feed: "_Feed") -> np.ndarray:
        """The next chunk of ``feed``, now that its slot has come: its lateness is counted
        (past the tolerance, or after a failure, this raises) and its piece of the resampled
        input is cut."""
        k = feed.base + feed.i
        # sent after its slot: a stall, or the sessions sent before it on this tick
        late = self._loop.time() - (self._t0 + k / SAMPLE_RATE)
        if late > self.lateness.input:
            self.lateness.input = late
        self._too_late()
        self._check()
        j = min(len(feed.x), feed.i + self.chunk)
        # the chunk due at k carries input [k - lag, j - lag): the filter's lookahead
        upto = self._resampler.out_index(max(feed.first, feed.base + j - self._resampler.lag)) \
            - feed.origin
        piece = feed.y[feed.done:upto]
        feed.done = max(feed.done, upto)
        return piece

    def _sent_chunk(self, feed: "_Feed") -> None:
        j = min(len(feed.x), feed.i + self.chunk)
        self._inputs.append(feed.x[feed.i:j])
        self._sent = feed.base + j
        feed.i = j

    def _clocked(self, feed: "_Feed") -> "asyncio.Future[np.ndarray | None]":
        """Send ``feed``'s chunks from the send clock's releases (``Pacer.call_at_slot``), each
        at its slot, by ``session.send_nowait``. The future is done with None once every chunk
        is out, with a chunk's piece when the session would not take it at once (the task
        then awaits ``send`` for it, in order, and comes back), or with the trial's failure."""
        return _ClockedSend(self, feed).fut

    # -- output --

    def _too_late(self) -> None:
        """Past the guard's tolerance this attempt will not be scored: stop it now."""
        if self._tolerance is not None and self.lateness.worst > self._tolerance:
            self._fail(clock.TrialLate(self.lateness.to_dict()))

    def _fail(self, error: ModelError) -> None:
        if self._failure is None:
            self._failure = error
            self._record(self._clock(), f"failed: {error}")

    async def _read(self) -> None:
        try:
            async for ev in self.session.events():
                await self._on_event(ev)
            if not self._closing:
                self._fail(TransientModelError(
                    f"the session ended mid-instance at t={self._clock():.2f}s"))
        except asyncio.CancelledError:
            raise
        except ModelError as e:
            if not self._closing:
                self._fail(e)
        except Exception as e:
            if not self._closing:
                self._fail(TransientModelError(
                    f"the session died mid-instance at t={self._clock():.2f}s: "
                    f"{type(e).__name__}: {e}"))

    async def _on_event(self, ev: Event) -> None:
        at = self._clock()
        # an event that waited out a stall of the loop is stamped that much late
        self.lateness.output = max(self.lateness.output, self._monitor.late(self._loop.time()))
        self._too_late()
        self._watch.beats += 1
        if isinstance(ev, AudioDelta):
            self.playback.add_audio(at, ev.item_id, _checked_audio(ev.audio, at))
        elif isinstance(ev, TranscriptDelta):
            self.playback.add_text(ev.item_id, ev.text)
        elif isinstance(ev, ItemDone):
            self.playback.finish(ev.item_id)
        elif isinstance(ev, ResponseDone):
            self.playback.finish()
            self._record(at, scrub_received(f"response_done {ev.status}"))
        elif isinstance(ev, SpeechStarted):
            self._record(at, "speech_started")
            if ev.interrupt:
                await self._interrupt(at)
        elif isinstance(ev, Note):  # what a server said is scrubbed here too, for every adapter
            self._record(at, scrub_received(ev.text))
        elif isinstance(ev, Error):
            said = scrub_received(f"{ev.code or ''}: {ev.message}".strip())
            self._record(at, f"model_error {said}")
            if ev.fatal:
                cls = TransientModelError if ev.transient else ModelError
                self._fail(cls(f"provider error {said}"))

    async def _interrupt(self, at: float) -> None:
        for item_id, played_ms in self.playback.interrupt(at):
            self._record(at, f"truncate {item_id} {played_ms}ms")
            try:
                await self.session.truncate(item_id, played_ms)
            except ModelError as e:
                self._fail(e)

    async def stop_playback(self) -> None:
        """Stop what is playing now (a client-side barge-in), truncating as on SpeechStarted."""
        await self._interrupt(self._clock())

    def _settled(self) -> float:
        """Where the heard output is final: the session clock, but never past the wall clock
        (audio before the wall clock has played; later audio can still be cut)."""
        return min(self.now, self._clock()) if self._t0 is not None else 0.0

    def _hear_until(self, until: float) -> None:
        """Feed the heard track up to ``until`` through the streaming resampler (so polling
        ``heard()`` costs only the new audio)."""
        stop = int(round(until * self.output_sample_rate))
        if stop > self._fed:
            self._heard16.append(self._to16.push(self.playback.samples(self._fed, stop)))
            self._fed = stop

    def _heard_to(self, end: float) -> np.ndarray:
        """The whole heard track up to ``end``, the resampler's tail flushed (``close``)."""
        self._hear_until(end)
        return np.concatenate([self._heard16.view(), self._to16.flush()])

    def heard(self) -> np.ndarray:
        """Heard output at 16 kHz from t = 0; like the stepped duplex's it may trail ``now``
        by the resampler's delay (a few ms) but never changes once returned."""
        self._hear_until(self._settled())
        return self._heard16.view()

    def transcript(self) -> list[Word]:
        return self.playback.words(self._settled())

    async def close(self) -> Recording:
        self._closing = True
        # a stall that ends now, before the ticker could see it, still counts
        self.lateness.stall = max(self.lateness.stall, self._monitor.late(self._loop.time()))
        self._monitor.unwatch(self.lateness)
        end = self.now
        self._reader.cancel()
        try:
            await self._reader
        except asyncio.CancelledError:
            pass
        try:
            await self.session.close()
        except Exception as e:  # closing a dead socket is not a new failure
            log.debug("closing the session failed: %s", e)
        # what the provider reported (tokens, audio seconds), read even when the trial failed
        # so a retried instance is charged for every attempt (usage.py)
        spent = self.session.usage if isinstance(self.session, ReportsUsage) else None
        self.usage = dict(spent or {})
        if self.lateness.input > self.chunk / SAMPLE_RATE:
            self._record(end, f"input_lag max {self.lateness.input * 1000:.0f}ms")
        self._check()
        inp = np.concatenate(self._inputs) if self._inputs else np.zeros(0, np.float32)
        # the rest of the heard track, resampled in a worker thread (soxr releases the GIL):
        # on the loop's thread, seconds of output at the end of a trial held up every other
        # live session for milliseconds; nothing else touches the track once closing
        out = await asyncio.to_thread(self._heard_to, end)
        n = len(inp)
        out = out[:n] if len(out) >= n else np.concatenate([out, np.zeros(n - len(out),
                                                                            np.float32)])
        clock = self.lateness.to_dict()
        if self.admission_s > 0.0005:  # time in the server's queue: the trial's, not the model's
            clock["admission_ms"] = round(self.admission_s * 1000, 1)
        return Recording(input=inp, output=out,
                         transcript=tuple(self.playback.words(end, final=True)),
                         events=list(self.events), usage=self.usage, clock=clock)


# --- many sessions at once ---------------------------------------------------------------

T = TypeVar("T")


async def run_with_retry(job: Callable[[], Awaitable[T]],
                         policy: RetryPolicy = STREAMING) -> T:
    """Run ``job`` (a fresh attempt each call); transient failures are retried from scratch,
    and the last one comes out as a ``ModelError`` naming the number of attempts."""
    for attempt in range(1, policy.max_attempts + 1):
        try:
            return await job()
        except TransientModelError as e:
            if attempt == policy.max_attempts:
                raise ModelError(f"{e} (gave up after {attempt} attempts)") from e
            wait = policy.delay(attempt)
            log.info("transient model failure (%s); retrying in %.1fs", e, wait)
            with watchdog.harness_waiting():  # ours, bounded by the policy: not the model's
                await asyncio.sleep(wait)
    raise AssertionError("unreachable")


__all__: Sequence[str] = ["PlaybackBuffer", "RetryPolicy", "StreamingDuplex", "run_with_retry"]
