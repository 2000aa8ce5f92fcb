"""The ``duplexact`` console script: dataset validation and report tools.

    duplexact validate DIR                 check a dataset before any model is called
    duplexact inspect hf:REPO|hf:/DIR       what the released parquet holds (to complete a mapping)
    duplexact import hf:REPO|hf:/DIR --out DIR   convert the released data to the format
    duplexact report RUN.json [--html F] [--markdown F]
    duplexact merge A.json B.json ... -o merged.json
    duplexact compare A.json B.json [--html F]   run B against run A, instance by instance
    duplexact rescore RUN --transcriber=NAME   the same recordings heard by another transcriber,
                                               compared with RUN (no model call)
    duplexact models [NAME -o KEY=VALUE ...] built-in models, what they need, what is here

Each subcommand lives in its own module; this file only dispatches (and ends quietly when
stdout's reader closes it early, ``| head``; ``report`` and ``compare`` then keep their own
exit status: report/output.py).
"""

from __future__ import annotations

import argparse
import sys


def _page_audio(p, whose: str, unit: str) -> None:
    """The HTML page's audio options (report/views/html.py AUDIO_MODES)."""
    p.add_argument("--audio", choices=["embed", "link", "none"], default="embed",
                   help=f"{whose}' audio in the HTML page: embedded, linked, or none")
    p.add_argument("--embed-limit", type=_count, help=f"embed audio for at most N {unit}")


def _count(text: str) -> int:
    """A whole number >= 0 (argparse's own one-line error otherwise)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {n}")
    return n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="duplexact", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("validate", help="check a dataset folder against the format")
    p.add_argument("dataset", help="folder with dataset.json and instances.jsonl")
    p.add_argument("--no-audio", action="store_true",
                   help="check the manifest only, do not open audio files")
    p.add_argument("--headers-only", action="store_true",
                   help="read audio headers only (a run's own check) instead of decoding every "
                        "file; misses corrupt bodies")

    for name, text in (("inspect", "describe a released parquet snapshot, per config"),
                       ("import", "convert a released parquet snapshot to a dataset folder")):
        p = sub.add_parser(name, help=text)
        p.add_argument("source", help="hf:OWNER/NAME[@REV] or hf:/path/to/snapshot (or a path)")
        p.add_argument("--mapping", metavar="FILE.toml", help="completes the bundled mapping")
        if name == "import":
            p.add_argument("--out", required=True, metavar="DIR", help="new dataset folder")
            p.add_argument("--skip-unmappable", action="store_true",
                           help="leave out rows the mapping cannot place (listed)")
        else:
            p.add_argument("--examples", type=int, default=1, metavar="N",
                           help="example values shown per metadata key")

    p = sub.add_parser("report", help="render a stored JSON report")
    p.add_argument("report", help="report.json of a run (or of a merge)")
    p.add_argument("--html", metavar="PATH", help="write a self-contained HTML page")
    p.add_argument("--markdown", metavar="PATH", help="write Markdown (for a PR comment)")
    p.add_argument("--baseline", metavar="PATH", help="compare with a stored report")
    p.add_argument("--baseline-alpha", type=float, default=0.05,
                   help="significance level of the regression comparison")
    p.add_argument("--ignore-borderline", action="store_true",
                   help="set aside flips whose immediate verdict was borderline in either run")
    _page_audio(p, "failed instances", "failures")
    p.add_argument("--recordings", action="append", metavar="RUN_DIR",
                   help="run directory holding the recordings (repeatable, for merged shards)")

    p = sub.add_parser("compare", help="compare run B with run A: paired per instance when "
                                       "both ran the same instances (McNemar, flips)")
    p.add_argument("a", metavar="A", help="report.json of the baseline run")
    p.add_argument("b", metavar="B", help="report.json of the run compared with it")
    p.add_argument("--html", metavar="PATH", help="write the comparison page")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="family-wise significance level (Holm) of a drop")
    p.add_argument("--ignore-borderline", action="store_true",
                   help="set aside flips whose immediate verdict was borderline in either run")
    _page_audio(p, "the flips", "flips")

    p = sub.add_parser("robustness", help="action x channel pass rates of one model's runs "
                                          "under --duplexact-channel (a Markdown table)")
    p.add_argument("reports", nargs="+", help="report.json files (the first one's model and "
                                              "data; the clean run is the reference)")
    p.add_argument("--store", metavar="DIR", help="also every run stored there "
                                                  "(--duplexact-autosave's folder)")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="family-wise significance level (Holm) of a change")

    from .rescore import add_parser as add_rescore

    add_rescore(sub)

    p = sub.add_parser("merge", help="combine shard reports into one")
    p.add_argument("reports", nargs="+",
                   help="shard report.json files or globs (quoted: 'shards/*/report.json')")
    p.add_argument("-o", "--output", required=True, help="merged report path")
    p.add_argument("--allow-incomplete", action="store_true",
                   help="merge even when instances of the selection have no outcome in any "
                        "report (the merged report lists them in 'incomplete')")
    p.add_argument("--store", metavar="DIR", help="the run store the robustness section is "
                                                  "built from (default .duplexact, as a run's)")
    p.add_argument("--gate", action="append", metavar="EXPR",
                   help="gate the merged run, as --duplexact-gate (repeatable): exit 1 when "
                        "one fails")
    p.add_argument("--baseline", metavar="REPORT",
                   help="gate the merged run against a stored report, as --duplexact-baseline")
    p.add_argument("--baseline-alpha", type=float, metavar="ALPHA",
                   help="the baseline test's significance level (default 0.05)")
    p.add_argument("--ignore-borderline", action="store_true",
                   help="set aside flips of borderline verdicts, as "
                        "--duplexact-baseline-ignore-borderline")

    p = sub.add_parser("models", help="list the built-in models, what each needs and whether "
                                      "it is present here")
    p.add_argument("names", nargs="*", metavar="NAME", help="check only these models")
    # --duplexact-model-option too: a hint printed for pytest pastes here as it is
    p.add_argument("-o", "--option", "--duplexact-model-option", action="append",
                   metavar="KEY=VALUE",
                   help="a model option, as --duplexact-model-option (one NAME only): checks "
                        "its files and runs the model's preflight")

    args = parser.parse_args(argv)
    if args.command == "validate":
        from .validate import main as run
    elif args.command == "models":
        from .model_listing import main as run
    elif args.command in ("inspect", "import"):
        from ..released.commands import main as run
    elif args.command == "report":
        from ..report.views.show import main as run
    elif args.command == "compare":
        from ..report.views.compare import main as run
    elif args.command == "robustness":
        from ..report.sections.robustness import main as run
    elif args.command == "rescore":
        from .rescore import main as run
    else:
        from ..report.store.merge import main as run
    try:
        status = run(args)
        sys.stdout.flush()  # a closed pipe shows here, not in the exit's own flush
    except BrokenPipeError:  # stdout's reader stopped early (| head): no traceback
        from ..report.output import stdout_gone

        stdout_gone()
        return 1  # what Python itself exits with on EPIPE
    return status


if __name__ == "__main__":
    sys.exit(main())
