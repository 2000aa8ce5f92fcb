"""Moshi behind the bridge, in moshi's own environment (its own torch pin)::

    pip install --no-deps pytest-duplexact websockets   # beside moshi's own install
    python -m pytest_duplexact.bridges.moshi --mimi-weights tokenizer-e351c8d8-checkpoint125.safetensors \\
        --lm-weights model.safetensors --tokenizer tokenizer_spm_32k_3.model --port 8765
    # on the benchmark machine:
    pytest --duplexact-model=bridge --duplexact-model-option=url=ws://gpu-box:8765

The frame loop is the in-process adapter's (models/moshi.py, ``MoshiModel``), not a copy:
each connection is a trial (``begin`` seeded from the run's seed, as in process), each step
sends the audio heard in that frame and the text piece played with it, and the plugin's client
turns the pieces into words by the rule the in-process adapter uses (models/words.py), so a
run through the bridge reports what the in-process adapter reports for the same seed.

The checkpoint and sampling are fixed when the server starts (the options of
``--duplexact-model=moshi``, as ``--dashed-names``); a trial takes no query options.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from ..models.moshi import FRAME_SIZE, SAMPLE_RATE, MoshiModel, MoshiOptions, load
from .kit import main as serve_main, typed_options

PROG = "python -m pytest_duplexact.bridges.moshi"


class MoshiBridge:
    name, mode, transcript = "moshi", "stepped", True
    sample_rate, frame = SAMPLE_RATE, FRAME_SIZE

    def __init__(self, model: MoshiModel):
        self.model = model

    def open(self, options: dict[str, str], trial: Any) -> "MoshiTrial":
        typed_options(options, {})  # none: the checkpoint and sampling are the server's
        self.model.begin(trial.seed)
        return MoshiTrial(self.model)


class MoshiTrial:
    def __init__(self, model: MoshiModel):
        self.model = model

    def step(self, frame):
        audio, piece = self.model.step_piece(frame)
        return audio, (piece.replace("▁", " ") if piece else ())

    def close(self) -> None:
        self.model.finish()


def add_arguments(p: argparse.ArgumentParser) -> None:
    for f in dataclasses.fields(MoshiOptions):
        required = f.default is dataclasses.MISSING
        p.add_argument("--" + f.name.replace("_", "-"), dest=f.name, required=required,
                       help=f"the moshi option {f.name}" + ("" if required else
                                                            f" (default {f.default!r})"))


def build(args: argparse.Namespace) -> MoshiBridge:
    names = [f.name for f in dataclasses.fields(MoshiOptions)]
    options = {k: getattr(args, k) for k in names if getattr(args, k) is not None}
    return MoshiBridge(load(MoshiOptions.parse(options)))


if __name__ == "__main__":
    raise SystemExit(serve_main(build, prog=PROG, description=__doc__.split("\n")[0],
                                add_arguments=add_arguments))
