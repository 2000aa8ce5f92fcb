"""What a run imports: the README's first command (the oracle, stepped, scored by the ONNX VAD)
needs neither torch nor the OpenAI SDK, and imports neither. They cost 2 s and 1.2 s of CPU
at every start (every inner run of this suite, every shard of a sharded run); one stray
top-level import (a judge's client, silero's package) brought each back once already."""

from __future__ import annotations

HEAVY = ("torch", "openai", "google.genai")

CONFTEST = f"""
import sys

def pytest_unconfigure(config):
    loaded = [m for m in {HEAVY!r} if m in sys.modules]
    with open("imported.txt", "w") as f:
        f.write(" ".join(loaded))
"""


def test_an_oracle_run_imports_neither_torch_nor_an_sdk(pytester, monkeypatch):
    monkeypatch.setenv("DUPLEXACT_VAD_BACKEND", "onnx")
    pytester.makeconftest(CONFTEST)
    res = pytester.runpytest_subprocess("--duplexact-model=oracle", "--duplexact-limit=1",
                                        "--duplexact-action=take_turn,stop,interrupt",
                                        "-p", "no:cacheprovider", "--duplexact-run-dir=run",
                                        timeout=300)
    assert res.ret == 0, res.stdout.str()
    assert (pytester.path / "imported.txt").read_text() == ""
