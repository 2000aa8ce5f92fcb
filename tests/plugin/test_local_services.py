"""A run whose services are all local (oracle, silent: the rule simulator, the bundled
transcriber; a resumed run that called nothing) says so in one line, not under a "Remote
services" heading with nothing remote in it and a cost of zero per service (issue 31,
friction).

The plugin runs in process, as tests/plugin/test_first_day.py's do: each builds its own config
and session (plugins from their entry points, exit status, terminal output, files) as a new
pytest process does, without a process start's ~2 CPU-s. A user's folder has no asyncio ini:
pytest-asyncio is off in them."""

from __future__ import annotations

from tests.support.inner_runs import as_user

inproc = as_user()


def test_an_all_local_run_says_so_in_one_line(pytester):
    args = ("--duplexact-model=oracle", "--duplexact-action=wait", "--duplexact-limit=1",
            "--duplexact-run-dir=run", "-p", "no:cacheprovider", "-q")
    for run in (args, ("--duplexact-resume=run", "-p", "no:cacheprovider", "-q")):
        res = inproc(pytester, *run)
        out = res.stdout.str()
        assert res.ret == 0, out
        assert "Remote services" not in out and "Estimated cost" not in out
        [line] = [ln for ln in res.stdout.lines if ln.startswith("Services: ")]
        assert line == ("Services: simulator rule, transcriber offline:tiny.en (all local: "
                        "no remote calls, nothing to pay)")
