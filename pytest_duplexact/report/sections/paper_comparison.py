"""The paper side by side (report key ``paper_comparison``), written only for runs on the
released data (docs/released-data.md, docs/report-format.md).

Coverage: the run's instances per condition against the paper's 4,691 (Candor's 1,235 are not
released). Comparison: per condition, the run's I and S against each of the paper's models
(Table 16), two-sided two-proportion tests (report/stats.py: Fisher's exact test for small
samples, the pooled z-test otherwise; p = 2 x the smaller one-sided p), Holm-adjusted over the
whole family. Table 16 prints S with its n (n_S) but I without one; the paper's per-condition
instance count is not published, so I is tested with the largest n_S any model has for that
condition as the paper's n: a lower bound of the true n, so the test errs towards "not
significant".
"""

from __future__ import annotations

from ...data import paper as paper_data
from ...data import taxonomy
from ..model import Report
from ..stats import drop_test, holm, rate_of

ALPHA = 0.05
PAPER_TOTAL = 4691
CANDOR_ITEMS = 1235
RELEASED_ITEMS = 3456
# From the dataset card: released items per action (Candor excluded), its record's.
RELEASED_PER_ACTION = {a: r.released_items for a, r in taxonomy.RECORDS.items()
                       if r.released_items is not None}


def _two_sided(k1: int, n1: int, k2: int, n2: int) -> tuple[str, float]:
    t1, p1 = drop_test(k1, n1, k2, n2)
    _, p2 = drop_test(k2, n2, k1, n1)
    return t1, min(1.0, 2.0 * min(p1, p2))


def paper_section(report: Report) -> dict:
    paper = paper_data.load()
    summary = report.summary
    coverage, rows = [], []
    for c in taxonomy.CONDITIONS:
        counts = summary.counts(c.action, c.id)
        n_run = counts["n"] if counts else 0
        n_s = [paper.table16[m.name][c.key]["n_S"] for m in paper.models
               if c.key in paper.table16.get(m.name, {})]
        paper_n_min = max(n_s) if n_s else None
        coverage.append({"action": c.action, "condition": c.id, "instances": n_run,
                         "paper_n_at_least": paper_n_min})
        if not counts:
            continue
        for m in paper.models:
            cell = paper.condition(m.name, c.key)
            if cell is None:
                continue
            for metric in taxonomy.RATE_KINDS:
                ours = rate_of(counts, metric)
                theirs = cell[metric]
                n_paper = cell["n_S"] if metric == "S" else paper_n_min
                if not ours.n or theirs is None or not n_paper:
                    continue
                k_paper = round(theirs * n_paper)
                test, p = _two_sided(k_paper, n_paper, ours.successes, ours.n)
                rows.append({"action": c.action, "condition": c.id, "model": m.name,
                             "metric": metric, "run": ours.value, "run_n": ours.n,
                             "paper": theirs, "paper_n": n_paper,
                             "paper_n_is_lower_bound": metric == "I",
                             "delta": ours.value - theirs, "test": test, "p_value": p})
    for row, adj in zip(rows, holm([r["p_value"] for r in rows])):
        row["p_adjusted"] = adj
        row["significant"] = adj < ALPHA
    total = sum(x["instances"] for x in coverage)
    return {
        "paper_instances": PAPER_TOTAL, "released_instances": RELEASED_ITEMS,
        "candor_absent": CANDOR_ITEMS, "covered": total,
        "note": (f"this run covers {total} of the paper's {PAPER_TOTAL} instances; the "
                 f"{CANDOR_ITEMS} Candor instances are not released, so no run of the released "
                 "data reproduces the paper's pooled numbers exactly"),
        "released_per_action": RELEASED_PER_ACTION,
        "coverage": coverage, "alpha": ALPHA,
        "method": "two-sided two-proportion test (Fisher exact if small, else pooled z), "
                  "Holm-adjusted over every comparison; paper n for I = largest n_S "
                  "(lower bound)",
        "comparisons": rows,
        "significant": sum(r["significant"] for r in rows),
    }


def render_lines(section: dict) -> list[str]:
    """Terminal / Markdown lines: the coverage and the significant differences."""
    out = [f"paper side by side: {section['note']}"]
    sig = [r for r in section["comparisons"] if r["significant"]]
    out.append(f"  {len(section['comparisons'])} comparisons with the paper's models "
               f"(Table 16), {len(sig)} significant at {section['alpha']} (Holm)")
    for r in sig[:20]:
        out.append(f"  {r['action']}.{r['condition']} {r['metric']}: run "
                   f"{100 * r['run']:.1f}% (n={r['run_n']}) vs {r['model']} "
                   f"{100 * r['paper']:.1f}% (n={r['paper_n']}), p_adj={r['p_adjusted']:.3g}")
    if len(sig) > 20:
        out.append(f"  ... {len(sig) - 20} more in report.json (paper_comparison)")
    return out
