"""The hooks pytest-duplexact offers other plugins and conftest.py files (registered by
plugin.py's ``pytest_addhooks``), the way pytest-benchmark offers
``pytest_benchmark_update_json``. docs/reports.md, "Adding to report.json"."""

from __future__ import annotations

import pytest


@pytest.hookspec
def pytest_duplexact_report(report, config) -> None:
    """Called once on the controller with the run's typed report (``report.model.Report``)
    just before report.json is written (and stored, and summarised). Add to it by writing to
    ``report.extra``, a dict of JSON values written as report.json's ``extra`` key (absent
    while empty). The report's other fields are frozen: its numbers are the run's."""
