"""The import paths of modules that moved into report's rooms (``sections/``, ``views/``,
``store/``) or out to ``spend/``, kept working for one release: ``import
pytest_duplexact.report.html`` and ``from pytest_duplexact.report import html`` give
``pytest_duplexact.report.views.html`` itself, with a DeprecationWarning naming the new path.

A finder at the end of ``sys.meta_path`` answers only for these names, after the real finders
found no file there."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

PACKAGE = "pytest_duplexact.report"
# old name in report/ -> where the module is now
MOVED = {
    "baseline": "pytest_duplexact.report.sections.baseline",
    "count_checks": "pytest_duplexact.report.sections.count_checks",
    "gates": "pytest_duplexact.report.sections.gates",
    "judging": "pytest_duplexact.report.sections.judging",
    "paper_comparison": "pytest_duplexact.report.sections.paper_comparison",
    "robustness": "pytest_duplexact.report.sections.robustness",
    "timing": "pytest_duplexact.report.sections.timing",
    "charts": "pytest_duplexact.report.views.charts",
    "cli": "pytest_duplexact.report.views.show",
    "compare": "pytest_duplexact.report.views.compare",
    "compare_html": "pytest_duplexact.report.views.compare_page",
    "html": "pytest_duplexact.report.views.html",
    "job_summary": "pytest_duplexact.report.views.job_summary",
    "lanes": "pytest_duplexact.report.views.lanes",
    "latency": "pytest_duplexact.report.views.latency_rows",
    "markdown": "pytest_duplexact.report.views.markdown",
    "rows": "pytest_duplexact.report.views.rows",
    "terminal": "pytest_duplexact.report.views.terminal",
    "merge": "pytest_duplexact.report.store.merge",
    "budget": "pytest_duplexact.spend.budget",
    "cost": "pytest_duplexact.spend.cost",
    "estimate": "pytest_duplexact.spend.estimate",
    "progress": "pytest_duplexact.spend.pace",
}


def moved(name: str):
    """The module ``report.<name>`` is now, after a DeprecationWarning."""
    new = MOVED[name]
    warnings.warn(f"{PACKAGE}.{name} moved to {new}; the old path goes in the next release",
                  DeprecationWarning, stacklevel=3)
    return importlib.import_module(new)


_REAL_SPECS: dict = {}


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        package, _, name = fullname.rpartition(".")
        if package == PACKAGE and name in MOVED:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        module = moved(spec.name.rpartition(".")[2])
        _REAL_SPECS[spec.name] = module.__spec__  # the import system sets the alias's spec on it
        return module

    def exec_module(self, module):
        module.__spec__ = _REAL_SPECS.pop(module.__spec__.name, module.__spec__)


def install() -> None:
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.append(_Finder())
