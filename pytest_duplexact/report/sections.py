"""The sections a report gets after ``build_report`` from the run as a whole: usage, the
judges, the cost and, for runs on the released data, the paper side by side. One function,
called by the plugin at the end of a run (``pytest_plugin/session.py``) and by ``merge``, so a
merged report has every section the unsharded run's has. What only one of them knows (gates,
notes, the baseline, the estimate, the shards) each adds itself."""

from __future__ import annotations


def add_run_sections(report: dict, usage: dict | None, prices: dict | None,
                     judges: bool = True) -> None:
    """Adds to ``report`` in place. ``usage``: the run's total (``data/usage.total``), None
    when nothing recorded any (then no usage, judges or cost either); ``prices``: the price
    table (``cost.load_prices``), None when it could not be read (no cost); ``judges``: whether
    to write the judges section when the usage names judges."""
    if usage is not None:
        report["usage"] = usage
        from .judging import section as judges_section

        if judges and (judged := judges_section(usage)) is not None:
            report["judges"] = judged  # which judges, and whether S is the paper's kind
        if prices is not None:
            from .cost import estimate

            report["cost"] = estimate(usage, prices)
    if report["settings"].get("released") is not None:  # only runs on the released data
        from .paper_comparison import paper_section

        report["paper_comparison"] = paper_section(report)
