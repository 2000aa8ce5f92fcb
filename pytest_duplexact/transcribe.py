"""Transcription of model speech behind one interface (SPEC §2, §4).

Sources, in order of preference per model: the model's native time-aligned transcript
(handled in segmentation.py), or a ``Transcriber`` backend registered here by name.
"""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from .timeline import Word


@runtime_checkable
class Transcriber(Protocol):
    name: str  # stable id, part of cache keys and of the report

    def transcribe(self, audio: np.ndarray, sample_rate: int) -> Sequence[Word]:
        """Timed words, seconds relative to the start of ``audio``."""
        ...
