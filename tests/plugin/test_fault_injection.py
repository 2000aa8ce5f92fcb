"""Fault injection through the plugin, as a user runs it (-n 2): a model that hangs, raises,
exits or returns garbage on some instances. The run ends within its deadline budget, every
selected instance is accounted for (an outcome or an error), and the report's counts add up
to pytest's."""

from __future__ import annotations

import json
import re
import textwrap
import time
import zlib
from pathlib import Path

import pytest

from pytest_duplexact.data import taxonomy

FLAKY = textwrap.dedent('''
    """The oracle, broken on purpose on some instances (chosen by a hash of the id)."""
    import threading
    import zlib

    import numpy as np

    from pytest_duplexact.models.providers.oracle import OracleModel

    FAULTS = ("hang", "raise", "exit", "nan", "loud", "int16", None, None, None, None)
    NEVER = threading.Event()

    def fault_of(instance_id):
        return FAULTS[zlib.crc32(instance_id.encode()) % len(FAULTS)]

    class Flaky(OracleModel):
        def start(self, info):
            super().start(info)
            self._fault, self._k = fault_of(info.instance.id), 0

        def step(self, frame):
            self._k += 1
            out = super().step(frame)
            if self._k == 40 and self._fault is not None:
                if self._fault == "hang":
                    NEVER.wait()
                if self._fault == "raise":
                    raise RuntimeError("injected crash")
                if self._fault == "exit":
                    raise SystemExit("injected exit")
                audio = np.asarray(getattr(out, "audio", out), np.float32).copy()
                if self._fault == "nan":
                    audio[3] = np.nan
                    return audio
                if self._fault == "loud":
                    return audio + np.float32(1e20)
                return (audio * 32767).astype(np.int16)
            return out

    def factory(**options):
        return Flaky(**options)
''')

FAULTS = ("hang", "raise", "exit", "nan", "loud", "int16", None, None, None, None)


def fault_of(instance_id: str):
    return FAULTS[zlib.crc32(instance_id.encode()) % len(FAULTS)]


@pytest.mark.slow
def test_a_faulty_model_under_xdist_ends_on_time_and_every_instance_is_accounted(pytester):
    pytester.makepyfile(flaky_model=FLAKY)
    timeout = 1.0
    t0 = time.monotonic()
    res = pytester.runpytest_subprocess(
        "--duplexact-model=flaky_model:factory", "--duplexact-limit=1", "-n", "2",
        f"--duplexact-timeout={timeout}", "--duplexact-run-dir=run", "-p", "no:cacheprovider",
        "-p", "no:randomly", timeout=240)
    took = time.monotonic() - t0
    report = json.loads(Path(pytester.path, "run", "report.json").read_text())
    ids = [i["id"] for i in report["instances"]]
    assert len(ids) == len(set(ids)) == len(taxonomy.CONDITIONS)  # every selected instance
    bad = {i for i in ids if fault_of(i) is not None}
    assert 4 <= len(bad) < len(ids), "the hash spread no faults: pick another fault table"
    errored = {i["id"] for i in report["instances"] if i["error"]}
    assert errored == bad
    for i in report["instances"]:
        if fault_of(i["id"]) == "hang":
            assert "did not answer for 1 s" in i["error"] and "Flaky.step" in i["error"]
        if fault_of(i["id"]) == "exit":
            assert "SystemExit" in i["error"] and "contained" in i["error"]
    assert report["totals"] == {"errors": len(bad), "instances": len(ids)}
    outcomes = res.parseoutcomes()
    assert outcomes.get("errors", 0) == len(bad)
    assert sum(outcomes.get(k, 0) for k in ("passed", "failed", "skipped", "errors")) \
        == len(ids)
    # the budget: every hang costs one deadline; everything else runs as usual
    hangs = sum(fault_of(i) == "hang" for i in ids)
    assert took < 120 + hangs * (timeout + 1), took
    assert re.search(r"\d+ error", res.stdout.str())
