"""``python -m pytest_duplexact.fixturegen [--out DIR] [--source FILE] [--only ID ...]
[--name NAME]``"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from . import dataset_writer, source, tts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m pytest_duplexact.fixturegen",
        description="Render the fixture source with espeak-ng into a DuplexAct dataset folder.")
    ap.add_argument("--out", type=Path, default=None,
                    help="dataset folder to write (default: the bundled fixtures/ folder)")
    ap.add_argument("--source", type=Path, default=None,
                    help="source TOML (default: fixtures/source/transcripts.toml)")
    ap.add_argument("--only", nargs="+", metavar="ID",
                    help="render just these instance ids; their manifest lines replace the "
                         "ones already in --out, the others are kept")
    ap.add_argument("--name", default=None,
                    help="the dataset's name in dataset.json (default: the source's `name`, "
                         "else duplexact-bundled for the bundled set and the --out folder's "
                         "name for any other source)")
    args = ap.parse_args(argv)
    from ..data import instance

    out = args.out or instance.bundled_root()
    if not tts.available():
        print("error: espeak-ng is not installed (apt-get install espeak-ng)", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    try:
        s = dataset_writer.generate(out, args.source, args.only, name=args.name)
    except source.SourceError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {s.written} instance(s) to {s.out} ({s.total} in the manifest, "
          f"{s.audio_files} audio files, {s.bytes / 1e6:.2f} MB) in "
          f"{time.perf_counter() - t0:.1f} s")
    if args.source is not None and not args.only:
        print(f"the source covers {s.coverage}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
