"""Direct Replay (SPEC §7): stream the instance's fixed user audio, then the observation
period of silence, while the model's output is recorded on the same clock."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..data.annotations import Instance
from ..data.audio import SAMPLE_RATE, silence
from ..data.taxonomy import OBSERVATION_PERIOD_S
from .duplex import Duplex, Recording

# 40 ms pushes: fine enough for online decisions (the simulator sees the model's output with
# at most this lag), coarse enough that a streaming adapter is not flooded with tiny writes.
CHUNK_S = 0.04


async def prepare(duplex: Duplex, samples: np.ndarray) -> None:
    """Duplex's hint that ``samples`` come next (a duck-typed duplex may lack it)."""
    prepare_ = getattr(duplex, "prepare", None)
    if prepare_ is not None:
        await prepare_(samples)
    elif getattr(duplex, "expect", None) is not None:
        duplex.expect(samples)


async def read_clip(duplex: Duplex, clip) -> np.ndarray:
    """``clip``'s samples, read the duplex's way (off a wall-clock loop's thread)."""
    read = getattr(duplex, "read_clip", None)
    return await read(clip) if read is not None else clip.load()


async def push_in_chunks(duplex: Duplex, samples: np.ndarray, chunk_s: float = CHUNK_S,
                         after_each: Callable[[], object] | None = None) -> None:
    """Push audio ``chunk_s`` at a time, calling ``after_each()`` after every chunk. With no
    ``after_each`` (nothing decided along the way) a free-running session (a stepped model)
    gets it in one push: the model sees the same frames, and the per-push work is paid once
    instead of every 40 ms (docs/benchmarks.md). So does a duplex that streams a push of any
    length on its own clock (``streams_pushes``: the streaming duplex sends it chunk by chunk
    at each chunk's wall-clock slot all the same); it only wakes the pipeline's task once."""
    samples = np.asarray(samples, dtype=np.float32)
    if after_each is None and getattr(duplex, "free_running", False):
        if len(samples):
            await duplex.push(samples)
        return
    await prepare(duplex, samples)
    if after_each is None and getattr(duplex, "streams_pushes", False):
        if len(samples):
            await duplex.push(samples)
        return
    step = max(1, int(round(chunk_s * SAMPLE_RATE)))
    for i in range(0, len(samples), step):
        await duplex.push(samples[i: i + step])
        if after_each is not None:
            after_each()


@dataclass(frozen=True)
class DirectReplay:
    chunk_s: float = CHUNK_S
    observation_s: float = OBSERVATION_PERIOD_S

    async def run(self, duplex: Duplex, instance: Instance) -> Recording:
        user = await read_clip(duplex, instance.clip("user"))
        await push_in_chunks(duplex, user, self.chunk_s)
        duplex.event("user_audio_end")
        await push_in_chunks(duplex, silence(self.observation_s), self.chunk_s)
        return await duplex.close()
