"""One retry policy for every remote call: judge / transcription requests (remote/calls.py,
each attempt an HTTP request) and streaming trials (pipelines/streaming_duplex.py, each attempt the
whole instance from scratch)."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    """``max_attempts`` at most; between them an exponential backoff
    ``backoff_base * 2**(n-1)`` capped at ``backoff_cap`` (scaled by a random 0.5-1 with
    ``jitter``, so many sessions retrying at once spread out), or the server's Retry-After
    capped at ``retry_after_cap``. ``timeout``: total seconds one HTTP request may take (not
    per read; remote calls). ``deadline``: total seconds for a logical remote request, retries
    and waits included (``None``: only the attempts bound it; remote/calls.py)."""

    max_attempts: int = 4
    backoff_base: float = 1.0
    backoff_cap: float = 20.0
    retry_after_cap: float = 60.0
    timeout: float = 60.0
    jitter: bool = False
    deadline: float | None = None

    def __post_init__(self):
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        if min(self.backoff_base, self.backoff_cap, self.retry_after_cap) < 0:
            raise ValueError("backoff and caps must be >= 0")
        if not self.timeout > 0 or (self.deadline is not None and not self.deadline > 0):
            raise ValueError("timeout and deadline must be > 0")

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.retry_after_cap)
        wait = min(self.backoff_base * 2 ** (attempt - 1), self.backoff_cap)
        return wait * random.uniform(0.5, 1.0) if self.jitter else wait


# A streaming trial: three more attempts of the whole instance, 1, 2, 4 s apart (jittered,
# capped at 30 s): a rate limit or dropped connection usually clears within seconds.
STREAMING = RetryPolicy(max_attempts=4, backoff_base=1.0, backoff_cap=30.0, jitter=True)
