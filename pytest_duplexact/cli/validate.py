"""``duplexact validate DIR``: check a dataset against docs/dataset-format.md before any model
is called. The checks are the loader's own (``instance.check_dataset``), so a dataset that
validates is exactly one a run accepts.

Prints every problem at once, one a line (``<file> [instance <id>] field '<f>': <message>``),
and exits 1; a valid dataset prints one summary line (instances per action) and exits 0. A
released parquet snapshot (``hf:...``, or a folder of parquet files without instances.jsonl)
gets one line naming the commands that read it (``released_hint``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..data.instance import MANIFEST, check_dataset
from ..data.instance import dataset_summary as summary  # also read as validate.summary
from ..rules import requires

# Where a snapshot's parquet files lie (the bundled mapping's [source].files patterns): not
# deeper, so a folder such as a home directory is not walked whole.
PARQUET_DEPTHS = ("*.parquet", "*/*.parquet", "*/*/*.parquet")


def released_hint(given: str) -> str | None:
    """One line for a released parquet snapshot given where a dataset folder belongs (an
    ``hf:`` source, or a folder with parquet files and no instances.jsonl): the commands that
    read it. None for anything else."""
    from ..released import HF_PREFIX

    root = Path(given.removeprefix(HF_PREFIX))
    if not given.startswith(HF_PREFIX):
        try:
            if not root.is_dir() or (root / MANIFEST).exists() or not any(
                    next(root.glob(f), None) for f in PARQUET_DEPTHS):
                return None
        except OSError:  # a folder that cannot be listed: the loader says so
            return None
    spec = given if given.startswith(HF_PREFIX) else f"{HF_PREFIX}{given}"
    return (f"{given}: a released parquet snapshot, not a dataset folder: `duplexact inspect "
            f"{spec}` shows what it holds, `duplexact import {spec} --out DIR` converts it "
            f"(then validate DIR), or a run reads it as it is with --duplexact-data={spec}")


def main(args) -> int:
    hint = released_hint(args.dataset)
    if hint:
        print(f"duplexact validate: {hint}", file=sys.stderr)
        return 1
    root = Path(args.dataset)
    if not root.is_dir():
        print(f"duplexact validate: {root}: not a folder (expected one with dataset.json and "
              "instances.jsonl)", file=sys.stderr)
        return 1
    decode = not args.no_audio and not getattr(args, "headers_only", False)
    dataset, problems = check_dataset(root, check_audio=not args.no_audio, decode=decode,
                                      requires=requires)
    if problems:
        for p in problems:
            print(p)
        where = {p.instance for p in problems if p.instance}
        print(f"{root.resolve()}: {len(problems)} problem(s) in {len(where)} instance(s) or "
              "line(s); a run refuses this dataset (docs/dataset-format.md)")
        return 1
    print(summary(dataset, audio_checked=not args.no_audio))
    return 0
