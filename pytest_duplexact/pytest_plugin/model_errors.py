"""A model error's report, short: the message, the model's call that raised (and the line
that raised, when that is deeper), and where the full traceback is. pytest's default report of
an instance's ModelError was about 85 lines, most of them the plugin's own frames (the
fixture, the watchdog's thread, asyncio, the pipeline), once per instance.

Only the report's text changes (its ``longrepr``): the outcome stays an error. The full
traceback is still pytest's with ``--tb=long`` (or any explicit ``--tb``), ``--full-trace``,
``-l`` or ``-v``, and always in the instance's error.txt (run/rundir.py)."""

from __future__ import annotations

import linecache
import os
import traceback
from pathlib import Path

import pytest

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the package's own model code: a frame there is the model's, not the harness's
_MODEL_CODE = tuple(os.path.join(_PACKAGE, d) + os.sep for d in ("models", "bridges"))
_STDLIB = os.path.dirname(os.__file__)


def _harness(path: str) -> bool:
    return path.startswith(_PACKAGE + os.sep) and not path.startswith(_MODEL_CODE)


def _stdlib(path: str) -> bool:
    return (path.startswith(_STDLIB) and "site-packages" not in path) or path.startswith("<")


class _Frame:
    """One traceback entry: where (file, line) and what (the function's qualified name)."""

    def __init__(self, frame, lineno: int):
        code = frame.f_code
        self.path, self.lineno = code.co_filename, lineno
        self.name = getattr(code, "co_qualname", code.co_name)


def model_frames(exc: BaseException) -> tuple[_Frame, _Frame] | None:
    """(the model's call the harness made, the frame that raised) for a model error: read
    off what the model raised (the ``__cause__`` a ModelError wraps), else the error itself;
    None when it was raised by the harness (a deadline: its message says where it waited)."""
    raised = exc.__cause__ if exc.__cause__ is not None else exc
    frames = [_Frame(f, n) for f, n in traceback.walk_tb(raised.__traceback__)
              if not _stdlib(f.f_code.co_filename)]
    for before, frame in zip(frames, frames[1:]):
        if _harness(before.path) and not _harness(frame.path):
            return frame, frames[-1]
    return None


def _shown(path: str, start: Path) -> str:
    rel = os.path.relpath(path, start)
    return path if rel.startswith("..") else rel


def _label(frame: _Frame, start: Path) -> str:
    return f"{frame.name} ({_shown(frame.path, start)}:{frame.lineno})"


def short_report(exc: BaseException, error_file: Path | None, start: Path,
                 building: bool = False) -> str:
    """The report's text: ``Type: message``, the model's call, its line, the pointer to
    the full traceback. Paths are shown relative to ``start`` (the invocation folder). A
    failed build (``building``) shows only where the factory's code raised: the call into
    it is the registry's, not one of the model's calls."""
    lines = [f"{type(exc).__name__}: {exc}"]
    frames = model_frames(exc)
    if frames is not None:
        entry, raised = frames
        where = f"  in the model's call {_label(entry, start)}"
        if building:
            where = f"  raised in {_label(raised, start)}"
        elif raised is not entry:
            where += f", raised in {_label(raised, start)}"
        lines.append(where)
        source = linecache.getline(raised.path, raised.lineno).strip()
        if source:
            lines.append(f"      {source}")
    full = "--tb=long or -v"
    if error_file is not None and error_file.is_file():
        full = f"{_shown(str(error_file), start)}, or run with {full}"
    lines.append(f"  (the full traceback: {full})")
    return "\n".join(lines)


def wanted(config) -> bool:
    """Shorten only under pytest's default traceback style and verbosity, without -l."""
    return (config.getoption("tbstyle", "auto") == "auto" and config.get_verbosity() < 1
            and not config.getoption("fulltrace", False)
            and not config.getoption("showlocals", False))


def failed_report(item, call, text: str) -> pytest.TestReport:
    """The report pytest makes of a failed ``call`` of ``item``
    (``TestReport.from_item_and_call``), with ``text`` as its longrepr in place of the
    formatted traceback that costs the formatting."""
    sections = [(f"Captured {key} {rwhen}", content)
                for rwhen, key, content in item._report_sections]
    return pytest.TestReport(item.nodeid, item.location, {k: 1 for k in item.keywords},
                             "failed", text, call.when, sections, call.duration, call.start,
                             call.stop, user_properties=item.user_properties)
