"""What ``pytest -l`` prints of an exception, for the tests that check no key is in it."""

from __future__ import annotations

import traceback


def shown_with_locals(exc: BaseException) -> str:
    """Every frame's locals by repr (as ``pytest -l`` and junit's long report show them), the
    exception chain included; from below the test's own frame (``pytest.raises`` caught it
    there), which holds the test's fake key."""
    exc = exc.with_traceback(exc.__traceback__.tb_next)
    return "".join(traceback.TracebackException.from_exception(
        exc, capture_locals=True).format())
