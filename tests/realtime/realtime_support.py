"""Helpers for the realtime tests: the fake server module and synthetic clips.

(A uniquely named module rather than conftest, so test files can import it by name.)"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

from pytest_duplexact.audio import SAMPLE_RATE


def _load_fake_server(file: str = "realtime_server"):
    """tests/fakes is not a package: load a fake server by path, once."""
    name = f"duplexact_fake_{file}"
    if name not in sys.modules:
        path = Path(__file__).resolve().parents[1] / "fakes" / f"{file}.py"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


fake = _load_fake_server()
minicpm_fake = _load_fake_server("minicpm_server")



def user_clip(spans: list[tuple[float, float]], total: float, hz: float = 300.0,
              amplitude: float = 0.3) -> np.ndarray:
    """16 kHz input: a tone burst ("speech") in each span, silence elsewhere. Span edges on
    20 ms boundaries make the fake server's VAD see them exactly."""
    x = np.zeros(int(round(total * SAMPLE_RATE)), np.float32)
    for start, end in spans:
        a, b = int(round(start * SAMPLE_RATE)), int(round(end * SAMPLE_RATE))
        t = np.arange(b - a) / SAMPLE_RATE
        x[a:b] = amplitude * np.sin(2 * np.pi * hz * t)
    return x
