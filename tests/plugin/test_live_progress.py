"""--duplexact-progress end to end (pytest_plugin/live_progress.py): the line redrawn in place
(bar) and the plain lines of a log (lines), serially and under pytest-xdist, where the
controller counts what the workers report."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_duplexact.pytest_plugin.live_progress import resolve

# one instance per condition of take_turn: 3
RUN = ("--duplexact-model=oracle", "--duplexact-action=take_turn", "--duplexact-limit=1",
       "-p", "no:cacheprovider")
LINE = re.compile(r"duplexact (\d+)/3( \| [^\r\n]*)")


@pytest.fixture(autouse=True)
def _not_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)  # auto is off in CI


def _raw(pytester) -> str:
    """The run's stdout as written (pytester's own lines split at every carriage return)."""
    return Path(pytester.path, "stdout").read_bytes().decode()


def _check_final(text: str) -> None:
    done = [int(m.group(1)) for m in LINE.finditer(text)]
    assert done and done == sorted(done) and done[-1] == 3, text
    last = list(LINE.finditer(text))[-1].group(0)
    assert "passed: take_turn 3/3" in last, last
    assert re.search(r"\| \d+s, ~\d+s left", last), last


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_lines_when_not_a_terminal(pytester, workers):
    res = pytester.runpytest_subprocess(*RUN, *workers, timeout=300)
    assert res.ret == 0
    raw = _raw(pytester)
    _check_final(raw)
    lines = [ln for ln in raw.splitlines() if LINE.search(ln)]
    assert 2 <= len(lines) <= 4, raw  # a tenth of the run at a time (here 1), and the end
    assert all(ln.startswith("duplexact ") for ln in lines), lines  # whole lines, no \r
    assert "\r" not in "".join(lines)


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_bar_is_one_line_redrawn_in_place(pytester, workers):
    res = pytester.runpytest_subprocess(*RUN, *workers, "--duplexact-progress=bar",
                                        timeout=300)
    assert res.ret == 0
    raw = _raw(pytester)
    _check_final(raw)
    draws = re.findall(r"\r(?:\x1b\[[0-9;]*m)*duplexact (\d+)/3", raw)
    assert [int(d) for d in draws][:3] == [1, 2, 3], raw
    first, last = raw.index("duplexact 1/3"), raw.rindex("duplexact 3/3")
    assert "\n" not in raw[first:last], raw  # redrawn, never a new line
    assert "test_take_turn.py ." not in raw  # the line replaces the instances' dots
    res.stdout.fnmatch_lines(["*3 passed*"])


def test_off_by_the_ini_key_and_a_bad_value_refused(pytester):
    pytester.makeini("[pytest]\nduplexact_progress = off\n")
    res = pytester.runpytest_subprocess(*RUN, timeout=300)
    assert res.ret == 0 and not LINE.search(_raw(pytester)), _raw(pytester)
    res = pytester.runpytest_subprocess(*RUN, "--duplexact-progress=fancy", timeout=300)
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "--duplexact-progress='fancy': use auto, bar, lines, off" in res.stderr.str()


class _Terminal:
    def __init__(self, tty: bool, verbosity: int = 0):
        self._tty, self.config = tty, self
        self._verbosity = verbosity

    def isatty(self) -> bool:
        return self._tty

    def get_verbosity(self) -> int:
        return self._verbosity


def test_auto_is_a_bar_on_a_terminal_lines_in_a_log_and_quiet_in_ci():
    assert resolve("auto", _Terminal(True), {}) == "bar"
    assert resolve("auto", _Terminal(False), {}) == "lines"
    assert resolve("auto", _Terminal(True, verbosity=1), {}) == "lines"  # -v: its own lines
    assert resolve("auto", _Terminal(True), {"CI": "true"}) == "off"
    assert resolve("auto", _Terminal(False), {"CI": "false"}) == "lines"
    assert resolve("lines", _Terminal(False), {"CI": "true"}) == "lines"  # asked
    assert resolve("bar", _Terminal(False), {"CI": "1"}) == "bar"
    assert resolve("bar", None, {}) == "off"  # no terminal reporter (-p no:terminal)
