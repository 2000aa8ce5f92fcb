"""A model error's report is short (issue 31 item 10): the message, the model's call that
raised and its line, where the full traceback is; about 85 lines of the plugin's own frames per
instance before. The outcome stays an error; --tb=long shows the whole traceback.

The plugin runs in process, as tests/plugin/test_first_day.py's do: each builds its own config
and session (plugins from their entry points, exit status, terminal output, files) as a new
pytest process does, without a process start's ~2 CPU-s. A user's folder has no asyncio ini:
pytest-asyncio is off in them."""

from __future__ import annotations

import re
import textwrap

import pytest

from tests.support.inner_runs import as_user

inproc = as_user()

CRASHY = textwrap.dedent('''
    from pytest_duplexact.models.providers.oracle import OracleModel

    class Crashy(OracleModel):
        def step(self, frame):
            return self._inner(frame)

        def _inner(self, frame):
            raise RuntimeError("simulated model crash")

    def factory(**options):
        return Crashy(**options)
''')
ARGS = ["--duplexact-model=crashy:factory", "--duplexact-action=take_turn",
        "--duplexact-condition=delayed", "--duplexact-limit=2", "-p", "no:cacheprovider"]


def _errors_section(out: str) -> list[str]:
    section = out.split(" ERRORS ", 1)[1].split("DuplexAct results", 1)[0]
    return [line for line in section.splitlines()[1:] if line.strip()]


def test_a_model_error_is_a_few_lines_per_instance(pytester):
    pytester.makepyfile(crashy=CRASHY)
    res = inproc(pytester, *ARGS)
    res.assert_outcomes(errors=2)
    assert res.ret == pytest.ExitCode.TESTS_FAILED
    lines = _errors_section(res.stdout.str())
    assert len(lines) <= 2 * 5, "\n".join(lines)  # a header and four lines each
    text = "\n".join(lines)
    assert text.count("ModelError: model oracle failed in step on instance take_turn-delayed-"
                      ) == 2
    assert text.count("RuntimeError: simulated model crash") == 2
    assert re.search(r"in the model's call Crashy\.step \(crashy\.py:\d+\), raised in "
                     r"Crashy\._inner \(crashy\.py:\d+\)", text), text
    assert 'raise RuntimeError("simulated model crash")' in text
    assert re.search(r"the full traceback: duplexact-runs/\S+/instances/take_turn-delayed-\S+"
                     r"/error\.txt, or run with --tb=long", text), text
    assert "pytest_duplexact" not in text and "asyncio" not in text  # no plugin internals
    res.stdout.fnmatch_lines(["ERROR *test_take_turn*delayed* - ModelError: *"])


def test_tb_long_still_shows_the_whole_traceback(pytester):
    pytester.makepyfile(crashy=CRASHY)
    res = inproc(pytester, *ARGS, "--tb=long")
    res.assert_outcomes(errors=2)
    text = "\n".join(_errors_section(res.stdout.str()))
    assert "The above exception was the direct cause of the following exception" in text
    assert "pipelines/stepped.py" in text


@pytest.mark.parametrize("tb, formatted", [((), False), (("--tb=long",), True)])
def test_the_long_traceback_is_not_formatted_to_be_thrown_away(pytester, monkeypatch, tb,
                                                               formatted):
    """pytest's long form parses every frame's source file (``ast.parse`` holds the GIL
    for tens of ms) in the pytest thread, beside trials streaming on the loop thread: the
    short report is built instead of it, not after it; ``--tb=long`` still formats it."""
    from _pytest import nodes

    calls = []
    real = nodes.Node._repr_failure_py

    def counted(self, *args, **kwargs):
        calls.append(self.nodeid)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(nodes.Node, "_repr_failure_py", counted)
    pytester.makepyfile(crashy=CRASHY)
    pytester.syspathinsert()
    result = pytester.inline_run(*ARGS, "-p", "no:randomly", "-p", "no:asyncio",
                                 "-p", "no:benchmark", *tb)
    errors = [r for r in result.getreports("pytest_runtest_logreport") if r.failed]
    assert len(errors) == 2 and all("simulated model crash" in str(r.longrepr)
                                    for r in errors)
    assert bool(calls) is formatted, calls


def test_a_clip_that_does_not_decode_is_two_lines_naming_the_file(pytester):
    """A dataset clip cut short (a copy that stopped half-way): the instance is an error, the
    others run, and its report is the message that names the file, not ~90 lines of the
    pipeline's frames."""
    import shutil

    from pytest_duplexact.data.instance import bundled_root

    data = pytester.path / "data"
    shutil.copytree(bundled_root(), data,  # copies: the cut below must not reach the package
                    ignore=shutil.ignore_patterns("source", "*.py", "__pycache__"))
    clip = data / "audio" / "take_turn-delayed-casual-01.user.flac"
    clip.write_bytes(clip.read_bytes()[:2000])
    res = inproc(pytester, "--duplexact-model=oracle", f"--duplexact-data={data}", *ARGS[1:])
    res.assert_outcomes(passed=1, errors=1)
    lines = _errors_section(res.stdout.str())
    assert len(lines) == 3, "\n".join(lines)  # pytest's header, the message, the pointer
    assert lines[1].startswith(f"AudioFormatError: {clip}: cannot be decoded: ")
    assert "error.txt, or run with --tb=long" in lines[2]
