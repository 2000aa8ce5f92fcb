"""What the Voila and BayLing-Duplex modules (a bridge of ours around the authors' own Python
code) share: the start command as docs/models.md prints it, the user's turn the harness sends (a tone),
and the author's code run in its environment."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np

from tests.upstream.bridged import printed_command
from tests.upstream.support import Checkout

TONE_HZ, TONE_LEVEL, RATE = 440.0, 0.3, 16_000


def docs_command(model: str) -> tuple[str, list[str]]:
    """The bridge module and arguments of ``model``'s start command as docs/models.md prints
    it (``bridged.printed_command``), placeholders (``DIR``, ...) as printed; its ``--port
    8765`` dropped (the harness takes a free port)."""
    argv = printed_command(model.replace("-", "_"))
    args = argv[3:]
    i = args.index("--port")
    del args[i:i + 2]
    return argv[2].rsplit(".", 1)[1], args


def fill(args: list[str], values: dict[str, str]) -> list[str]:
    """The printed placeholders replaced by this run's folders."""
    missing = [a for a in args if a.isupper() and a not in values]
    assert not missing, f"no value for the placeholders {missing}"
    return [values.get(a, a) for a in args]


def tone(start: float, end: float, total: float) -> np.ndarray:
    """The user's turn at 16 kHz: silence, a 440 Hz tone from ``start`` to ``end`` s, silence
    up to ``total`` s."""
    t = np.arange(int(round(total * RATE))) / RATE
    x = (TONE_LEVEL * np.sin(2 * np.pi * TONE_HZ * t)).astype(np.float32)
    x[(t < start) | (t >= end)] = 0.0
    return x


def tone_instance(tmp: Path, start: float, end: float, after: float):
    """take_turn.immediate whose user clip is ``tone(start, end, end + after)``."""
    from tests.support.builders import make_instance

    return make_instance(tmp, "take_turn", "immediate", {"user": tone(start, end, end + after)},
                         {"user_start": start, "user_end": end})


def run_author_python(ck: Checkout, script: Path, *args: str, timeout: float = 900) -> str:
    """``script`` (ours) run by the author's environment with the checkout on its path: its
    stdout's last line."""
    env = dict(os.environ, PYTHONPATH=str(ck.path), PYTHONDONTWRITEBYTECODE="1")
    res = subprocess.run([ck.python, str(script), *args], capture_output=True, text=True,
                         timeout=timeout, env=env, cwd=str(ck.path))
    assert res.returncode == 0, f"{script.name} failed: {res.stderr[-3000:]}"
    return res.stdout.strip().splitlines()[-1]
