"""The old import paths of report's moved modules (report/moved.py) still give the module,
the very object at its new path, with a DeprecationWarning naming that path: both as a
submodule import and as a name taken from the package."""

from __future__ import annotations

import importlib
import sys

import pytest

import pytest_duplexact.report as report
from pytest_duplexact.report.moved import MOVED, PACKAGE


def _forget(name: str) -> None:
    """As if the old path had never been imported (the import system caches it)."""
    sys.modules.pop(f"{PACKAGE}.{name}", None)
    report.__dict__.pop(name, None)


@pytest.mark.parametrize("name", sorted(MOVED))
def test_the_old_submodule_path_warns_and_is_the_new_module(name):
    _forget(name)
    with pytest.warns(DeprecationWarning, match=rf"{PACKAGE}\.{name} moved to {MOVED[name]}"):
        old = importlib.import_module(f"{PACKAGE}.{name}")
    new = importlib.import_module(MOVED[name])
    assert old is new
    assert new.__spec__.name == MOVED[name]  # the alias leaves the module's own spec


@pytest.mark.parametrize("name", sorted(MOVED))
def test_the_old_name_on_the_package_warns_and_is_the_new_module(name):
    _forget(name)
    with pytest.warns(DeprecationWarning, match=rf"moved to {MOVED[name]}"):
        old = getattr(report, name)
    assert old is importlib.import_module(MOVED[name])


def test_the_documented_paths_are_kept():
    """docs/reports.md's ``report.html.write`` and ``report.markdown.render``; the typed
    ``report.model.Report`` and the hook's ``report.hookspec`` never moved."""
    assert {"html", "markdown"} <= set(MOVED)
    _forget("html")
    with pytest.warns(DeprecationWarning):
        from pytest_duplexact.report.html import write
    from pytest_duplexact.report.views.html import write as new_write
    assert write is new_write
    from pytest_duplexact.report.hookspec import pytest_duplexact_report  # noqa: F401
    from pytest_duplexact.report.model import Report  # noqa: F401


def test_a_name_that_never_was_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        getattr(report, "nothing_here")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(f"{PACKAGE}.nothing_here")
