"""What the model bridges (``flm_audio``, ``bayling_duplex``, ``voila``) share on top of the
kit: the model's own package imported with a clear error, server-wide defaults for the
per-trial options, the trial seed, token ids turned into the kit's text pieces, and decoder
output cut into fixed frames.

Standard library and numpy only, like the kit: this module is imported before the model's
environment is known to be complete.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from .kit import OptionError, Trial, typed_options


class ModelMissing(SystemExit):
    """The model's own package is not importable here: the bridge runs in the model's
    environment (docs/models.md has each model's recipe)."""


def import_model(module: str, *, model: str, install: str, path: str | None = None) -> Any:
    """Import ``module`` of the model's own code; ``path`` (a checkout that is not an
    installed package) goes first on ``sys.path``. A missing module exits with what to
    install, never a bare ``ModuleNotFoundError`` traceback."""
    if path:
        root = str(Path(path).expanduser().resolve())
        if not Path(root).is_dir():
            raise ModelMissing(f"{model} bridge: {path!r} is not a directory (the checkout "
                               f"that holds {module}.py)")
        if root not in sys.path:
            sys.path.insert(0, root)
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        raise ModelMissing(f"{model} bridge: cannot import {module!r} ({e}); this bridge runs "
                           f"in {model}'s own environment: {install}") from None


def local_dir(option: str, value: str, *, model: str, holds: Sequence[str] = ()) -> Path:
    """A checkpoint folder given on the command line: it must exist here and hold ``holds``
    (nothing is downloaded: a hub id gets a message saying how to fetch it)."""
    path = Path(value).expanduser()
    if not path.is_dir():
        hint = (" (it looks like a hub repository id: download it first, e.g. "
                f"`hf download {value} --local-dir DIR`, and pass DIR)"
                if value.count("/") == 1 and not path.parent.exists() else "")
        raise SystemExit(f"{model} bridge: {option} {value!r} is not a local directory{hint}")
    missing = [name for name in holds if not (path / name).exists()]
    if missing:
        raise SystemExit(f"{model} bridge: {option} {value!r} lacks {', '.join(missing)}")
    return path


# --- per-trial options ------------------------------------------------------------------------

def add_option_flag(p: argparse.ArgumentParser, names: Sequence[str]) -> None:
    """``--option KEY=VALUE`` (repeatable): the server's default for a per-trial option; a
    trial's query parameters override it."""
    p.add_argument("--option", "-o", action="append", default=[], metavar="KEY=VALUE",
                   help="the server's default for a per-trial option (a trial's query "
                        f"parameter of the same name overrides it): {', '.join(names)}")


Check = Callable[[dict[str, Any]], None]  # raises OptionError for a value the model refuses


def server_defaults(pairs: Sequence[str], defaults: dict[str, Any], *, model: str,
                    check: Check | None = None) -> dict[str, Any]:
    """``defaults`` updated from ``--option KEY=VALUE`` flags, typed as the query parameters
    are (``kit.typed_options``) and checked; a bad flag exits naming it."""
    given: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"{model} bridge: --option {pair!r}: expected KEY=VALUE")
        given[key.strip()] = value.strip()
    try:
        out = typed_options(given, defaults)
        if check is not None:
            check(out)
    except OptionError as e:
        raise SystemExit(f"{model} bridge: --option: {e}") from None
    return out


def trial_options(options: dict[str, str], defaults: dict[str, Any], trial: Trial, *,
                  model: str, torch: Any, check: Check | None = None) -> dict[str, Any]:
    """One trial's options (its query parameters over the server's defaults), typed and
    checked; torch's sampling is seeded for the trial from the run's seed and ``seed``."""
    o = typed_options(options, defaults)
    if check is not None:
        check(o)
    torch.manual_seed(trial_seed(model, trial.seed, o["seed"]))
    return o


def trial_seed(model: str, run_seed: int, option_seed: int) -> int:
    """One sampling seed per (model, run seed, seed option): the same for every trial of a run,
    so a trial's result never depends on which trials the server ran before it."""
    digest = hashlib.sha256(f"{model}/{int(run_seed)}/{int(option_seed)}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


# --- text -------------------------------------------------------------------------------------

class TextDeltas:
    """A model's text token ids, segment by segment, as the kit's text pieces.

    ``decode`` is the model's own tokenizer (ids -> str). Each segment is decoded whole after
    every new id and only the new suffix is returned, so a piece that cannot be read alone
    (a multi-byte character split across ids, a SentencePiece word start) comes out right;
    a suffix ending in U+FFFD (an incomplete character) waits for the next id. The first
    piece of a segment starts with a space, which the kit reads as a new word."""

    def __init__(self, decode: Callable[[list[int]], str]):
        self._decode = decode
        self._ids: list[int] = []
        self._sent = ""

    def feed(self, token_id: int) -> str:
        self._ids.append(int(token_id))
        text = self._decode(self._ids)
        if text.endswith("\ufffd"):
            return ""
        return self._take(text)

    def end(self) -> str:
        """Close the segment; returns what was held back (an unfinished character is
        dropped: it never became text)."""
        rest = self._take(self._decode(self._ids).rstrip("\ufffd")) if self._ids else ""
        self._ids, self._sent = [], ""
        return rest

    def _take(self, text: str) -> str:
        # a decoder that revises earlier text (rare) cannot unsay it: only the tail is new
        new = text[len(self._sent):]
        if not new:
            return ""
        first = not self._sent
        self._sent = text
        return " " + new.lstrip() if first and not new[:1].isspace() else new


# --- audio ------------------------------------------------------------------------------------

class FrameQueue:
    """Decoder output of any length in, exactly ``frame`` samples out per step, silence while
    the queue is short (an underrun: counted in ``underruns``, until ``finish()`` says no more
    audio is coming: the silence after that is the model's, not a gap)."""

    def __init__(self, frame: int):
        self.frame = frame
        self._chunks: list[np.ndarray] = []
        self._size = 0
        self.underruns = 0
        self.pushed = 0
        self.finished = False

    def finish(self) -> None:
        """No more audio will be pushed: what is queued plays out, then silence."""
        self.finished = True

    def push(self, samples: np.ndarray) -> None:
        x = np.asarray(samples, dtype=np.float32).reshape(-1)
        if x.size:
            self._chunks.append(x)
            self._size += x.size
            self.pushed += x.size

    def pop(self) -> np.ndarray:
        out = np.zeros(self.frame, dtype=np.float32)
        take = min(self.frame, self._size)
        if take < self.frame and self.pushed and not self.finished:
            self.underruns += 1
        filled = 0
        while filled < take:
            head = self._chunks[0]
            n = min(take - filled, head.size)
            out[filled:filled + n] = head[:n]
            filled += n
            if n == head.size:
                self._chunks.pop(0)
            else:
                self._chunks[0] = head[n:]
        self._size -= take
        return out

    def __len__(self) -> int:
        return self._size
