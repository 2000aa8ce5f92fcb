"""``duplexact inspect SOURCE`` and ``duplexact import SOURCE --out DIR``."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from . import HF_PREFIX
from .errors import COMMAND_OPTIONS, ReleasedDataError


def _spec(source: str) -> str:
    return source if source.startswith(HF_PREFIX) else HF_PREFIX + str(Path(source).resolve())


def _log(msg: str) -> None:
    print(msg, file=sys.stderr)


def main(args) -> int:
    from ..data.suggest import new_folder_problem
    from .convert import absent_configs, describe_absent, import_snapshot
    from .inspect import inspect, render
    from .mapping import load_mapping
    from .snapshot import resolve_snapshot

    if args.command == "import":  # before any download or conversion
        problem = new_folder_problem(args.out, "--out")
        if problem:
            print(f"duplexact import: {problem}", file=sys.stderr)
            return 1
    try:  # a mapping file's messages name the file, not the source
        m = load_mapping(args.mapping, COMMAND_OPTIONS)
    except ReleasedDataError as e:
        print(f"duplexact {args.command}: {e}", file=sys.stderr)
        return 1
    spec = _spec(args.source)
    try:
        snap = resolve_snapshot(spec[len(HF_PREFIX):], m, log=_log, options=COMMAND_OPTIONS)
        absent = absent_configs(snap, m)
        if absent:  # said first: the rest of the output covers the other actions only
            _log(f"duplexact {args.command}: warning: {describe_absent(absent)}; these "
                 "actions are absent (patterns tried: [source].files of the mapping)")
        if args.command == "inspect":
            print(render(snap, inspect(snap, m, max(1, args.examples))))
            return 0
        out = Path(args.out)
        try:
            import_snapshot(snap, m, out, args.skip_unmappable, log=_log,
                            options=COMMAND_OPTIONS)
        except BaseException:
            shutil.rmtree(out, ignore_errors=True)
            raise
    except ReleasedDataError as e:  # the source named once: these messages leave it out
        print(f"duplexact {args.command}: {spec}: {e}", file=sys.stderr)
        return 1
    from ..data.instance import check_dataset
    from ..data.instance import dataset_summary as summary
    from ..rules import requires

    dataset, problems = check_dataset(out, requires=requires)
    if problems:  # what the conversion's own checks missed
        for p in problems:
            print(f"duplexact {args.command}: {p}", file=sys.stderr)
        shutil.rmtree(out, ignore_errors=True)  # as when the conversion itself refuses
        return 1
    print(summary(dataset))
    return 0
