"""``duplexact validate DIR``: check a dataset against docs/dataset-format.md before any model
is called. The checks are the loader's own (``instance.check_dataset``), so a dataset that
validates is exactly one a run accepts.

Prints every problem at once, one a line (``<file> [instance <id>] field '<f>': <message>``),
and exits 1; a valid dataset prints one summary line (instances per action) and exits 0.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..data.instance import check_dataset
from ..data.instance import dataset_summary as summary  # also read as validate.summary
from ..rules import requires


def main(args) -> int:
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
