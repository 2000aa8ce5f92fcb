"""The harness against the authors' own code: every ``tests/upstream`` module, one after the
other, each in its own pytest process with ``DUPLEXACT_UPSTREAM_TABLE`` set, then one table of
the rows they recorded (tests/upstream/support.py ``record_row``) and each module's outcome.

    DUPLEXACT_UPSTREAM_DIR=/path/to/checkouts python -m benchmarks.upstream [-k freeze] [--out FILE]
        [--dir test_vllm_omni=/path/to/other/checkouts]

``--dir MODULE=FOLDER`` runs that module with ``DUPLEXACT_UPSTREAM_DIR=FOLDER`` (vLLM-Omni's
duplex endpoint is in a release newer than a checkout of its main branch may be: its module's
docstring). A model whose module records several rows (one per test) gets one line: the
later rows' values over the earlier ones', their notes joined.

The layout of that folder and what each module needs: docs/models.md, "Checked against the
authors' code". A module whose checkout is missing skips and records no row (its outcome
says so). Sends nothing beyond 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from tests.upstream.support import TABLE_ENV, UPSTREAM_ENV  # noqa: E402

COLUMNS = ("model", "connects", "audio", "text", "barge-in stop", "onset error median / max (ms)",
           "sessions at once", "checked (commit, date)")


def modules(pattern: str | None) -> list[Path]:
    # test_harness checks the harness itself, against no checkout: no row of its own
    found = [m for m in sorted((ROOT / "tests" / "upstream").glob("test_*.py"))
             if m.stem != "test_harness"]
    return [m for m in found if not pattern or pattern in m.stem]


def run(module: Path, table: Path, upstream: str | None = None) -> tuple[str, float]:
    """The module's pytest outcome (its summary line) and wall seconds; ``upstream``: its
    checkouts' folder, if not ``DUPLEXACT_UPSTREAM_DIR``'s."""
    env = {**os.environ, TABLE_ENV: str(table), "PYTHONPATH": str(ROOT)}
    if upstream:
        env[UPSTREAM_ENV] = upstream
    t = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", str(module), "-q", "-rs",
                           "-p", "no:cacheprovider"], cwd=ROOT, env=env, capture_output=True,
                          text=True)
    lines = [x for x in proc.stdout.splitlines() if x.strip()]
    summary = lines[-1].strip("= ") if lines else f"exit {proc.returncode}"
    if proc.returncode not in (0, 5):
        print(proc.stdout[-4000:], file=sys.stderr)
    return summary, time.monotonic() - t


def mark(value: object) -> str:
    return {True: "yes", False: "no", None: "n/a"}.get(value, str(value)) \
        if isinstance(value, (bool, type(None))) else str(value)


def merged(rows: list[dict]) -> list[dict]:
    """One row per model, in the order first recorded: later values over earlier ones (a value
    left unset, None, keeps the earlier), notes joined."""
    out: dict[str, dict] = {}
    for r in rows:
        row = out.setdefault(r["model"], {})
        notes = [n for n in (row.get("notes"), r.get("notes")) if n]
        row.update({k: v for k, v in r.items() if v is not None})
        if notes:
            row["notes"] = "; ".join(notes)
    return list(out.values())


def render(rows: list[dict], outcomes: dict[str, tuple[str, float]]) -> str:
    rows = merged(rows)
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        onset = (f"{r['onset_err_ms_median']} / {r['onset_err_ms_max']}"
                 if r.get("onset_err_ms_median") is not None else "n/a")
        lines.append("| " + " | ".join([
            r["model"], mark(r.get("connects")), mark(r.get("audio")), mark(r.get("text")),
            mark(r.get("barge_in_stop")), onset, mark(r.get("sessions")),
            f"{r['checked']} ({r['date']})"]) + " |")
    notes = [f"- {r['model']}: {r['notes']}" for r in rows if r.get("notes")]
    runs = [f"- {name}: {summary} ({secs:.0f} s)" for name, (summary, secs) in outcomes.items()]
    return "\n".join(lines + ["", "Notes:", *notes, "", "Modules:", *runs])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", dest="pattern", help="only modules whose name contains this")
    parser.add_argument("--out", default="duplexact-runs/benchmarks/upstream.json")
    parser.add_argument("--dir", action="append", default=[], metavar="MODULE=FOLDER",
                        help="run MODULE (e.g. test_vllm_omni) with DUPLEXACT_UPSTREAM_DIR=FOLDER")
    args = parser.parse_args()
    dirs = dict(d.split("=", 1) for d in args.dir if "=" in d)
    if len(dirs) != len(args.dir) or set(dirs) - {m.stem for m in modules(None)}:
        print("--dir takes MODULE=FOLDER, MODULE one of tests/upstream/test_*.py's names "
              "(e.g. test_vllm_omni)", file=sys.stderr)
        return 2
    if not os.environ.get(UPSTREAM_ENV):
        print(f"{UPSTREAM_ENV} is not set: set it to the folder holding the authors' checkouts "
              "(docs/models.md, \"Checked against the authors' code\")", file=sys.stderr)
        return 2
    outcomes: dict[str, tuple[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        table = Path(tmp) / "rows.jsonl"
        for module in modules(args.pattern):
            outcomes[module.stem] = run(module, table, dirs.get(module.stem))
            print(f"{module.stem}: {outcomes[module.stem][0]}", file=sys.stderr, flush=True)
        rows = [json.loads(x) for x in table.read_text().splitlines()] if table.exists() else []
    print(render(rows, outcomes))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"rows": rows, "modules": outcomes}, indent=2))
    failed = [n for n, (summary, _) in outcomes.items() if "failed" in summary or "error" in summary]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
