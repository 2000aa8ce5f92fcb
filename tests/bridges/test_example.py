"""The "your own model behind the kit" example of docs/bridge-protocol.md §8, run for real: the
code block is written out as my_bridge.py, started as its own process, and stepped through by
the plugin's client."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np

from pytest_duplexact.models import resolve_model
from pytest_duplexact.models.contract import SessionInfo
from tests.support.servers import LISTENING, child

DOC = Path(__file__).parents[2] / "docs" / "bridge-protocol.md"


def example() -> str:
    text = DOC.read_text(encoding="utf-8")
    m = re.search(r"<!-- example: my_bridge.py -->\n```python\n(.*?)```", text, re.S)
    assert m, "the example block is gone from docs/bridge-protocol.md"
    return m.group(1)


def test_the_documented_example_bridge_runs(tmp_path):
    code = example()
    assert len(code.splitlines()) <= 40  # "about 30 lines on top of the kit"
    script = tmp_path / "my_bridge.py"
    script.write_text(code, encoding="utf-8")
    with child(script, "--port", "0", "--gain", "0.25", ready=LISTENING, stops_on_stdin=False,
               stderr=subprocess.PIPE) as server:
        model = resolve_model("bridge", url=server.url, delay_frames="3")
        assert (model.name, model.sample_rate, model.frame_size) == ("my-model", 24_000, 1_920)
        model.start(SessionInfo(instance=None))
        frames = [np.full(1920, 0.5 if k == 1 else 0.0, np.float32) for k in range(6)]
        outs = [model.step(f) for f in frames]
        model.finish()
    # frame 1 comes back 3 frames later at a quarter of its level, with its word
    np.testing.assert_array_equal(outs[4].audio, np.full(1920, 0.125, np.float32))
    assert all(not o.audio.any() for k, o in enumerate(outs) if k != 4)
    assert [w.text for o in outs for w in o.transcript] == ["echo"]
