"""The one "did you mean" of a misspelt name (a model, an action in a gate, ...)."""

from __future__ import annotations

import difflib
from typing import Iterable


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'wait'?)`` for the closest known name, else ``""``."""
    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
