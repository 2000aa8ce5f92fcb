"""Moshi behind the bridge, in moshi's own environment (its own torch pin)::

    pip install --no-deps pytest-duplexact websockets   # beside moshi's own install
    python -m pytest_duplexact.bridges.moshi_bridge --mimi-weights tokenizer-e351c8d8-checkpoint125.safetensors \\
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

Before it listens the bridge warms up (the kit's ``warmup`` hook, ``MoshiModel.warm_up``): four
frames of silence through a throwaway trial, as Kyutai's server does. moshi compiles its kernels
at their first call, so without it the first trial's step 0 took 30-55 s on a cold compile
cache, over the client's 30 s ``step_timeout``.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from ..models.providers.moshi import FRAME_SIZE, SAMPLE_RATE, MoshiModel, MoshiOptions, load
from .kit import BridgeModel, typed_options
from .kit import main as serve_main

PROG = "python -m pytest_duplexact.bridges.moshi_bridge"


class MoshiBridge(BridgeModel):
    name, mode, transcript = "moshi", "stepped", True
    sample_rate, frame = SAMPLE_RATE, FRAME_SIZE
    max_sessions = 1  # one model state: the most --max-sessions may ask (--batch B for more)

    def __init__(self, model: MoshiModel):
        self.model = model

    def warmup(self) -> None:  # the kit runs it before it listens (MoshiModel.warm_up)
        self.model.warm_up()

    def open(self, options: dict[str, str], trial: Any) -> "MoshiTrial":
        typed_options(options, {})  # none: the checkpoint and sampling are the server's
        self.model.begin(trial.seed)
        return MoshiTrial(self.model)


class MoshiTrial:
    def __init__(self, model: MoshiModel):
        self.model = model

    def step(self, frame):
        audio, piece = self.model.step_piece(frame)
        return audio, _texts(piece)

    def close(self) -> None:
        self.model.finish()


def _texts(piece):
    return piece.replace("▁", " ") if piece else ()


class BatchedMoshiBridge(MoshiBridge):
    """``--batch B``: up to B trials at once, each in a slot of one batched Mimi + LMGen
    (``MoshiModel.step_batch_pieces``), stepped together by the kit (bridges/kit.py, BatchStepper)."""

    def __init__(self, model: MoshiModel, size: int):
        super().__init__(model)
        self.max_sessions = size
        model.open_batch(size)
        self._free = list(range(size))

    def warmup(self) -> None:  # every slot, at the batch size the trials will use
        self.model.warm_up_batch()

    def open(self, options: dict[str, str], trial: Any) -> "MoshiSlot":
        from ..models.contract import SessionInfo

        typed_options(options, {})
        slot = self._free.pop(0)  # the kit admits at most max_sessions trials
        try:
            self.model.start_slot(slot, SessionInfo(instance=None, seed=trial.seed))
        except BaseException:
            self._free.append(slot)
            raise
        return MoshiSlot(self, slot)

    def step_batch(self, steps):
        pieces = self.model.step_batch_pieces({s.slot: frame for s, frame in steps})
        return [(pieces[s.slot][0], _texts(pieces[s.slot][1])) for s, _ in steps]


class MoshiSlot:
    def __init__(self, bridge: BatchedMoshiBridge, slot: int):
        self.bridge, self.slot = bridge, slot

    def step(self, frame):  # the kit steps a batched model through step_batch only
        return self.bridge.step_batch([(self, frame)])[0]

    def close(self) -> None:
        self.bridge.model.finish_slot(self.slot)
        self.bridge._free.append(self.slot)
        self.bridge._free.sort()


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--batch", type=int, default=1,
                   help="trials stepped together in one batched call (default 1; docs/runs.md)")
    for f in dataclasses.fields(MoshiOptions):
        required = f.default is dataclasses.MISSING
        p.add_argument("--" + f.name.replace("_", "-"), dest=f.name, required=required,
                       help=f"the moshi option {f.name}" + ("" if required else
                                                            f" (default {f.default!r})"))


def build(args: argparse.Namespace) -> MoshiBridge:
    names = [f.name for f in dataclasses.fields(MoshiOptions)]
    options = {k: getattr(args, k) for k in names if getattr(args, k) is not None}
    model = load(MoshiOptions.parse(options))
    batch = getattr(args, "batch", 1) or 1
    if batch < 1:
        raise SystemExit("--batch must be >= 1")
    return BatchedMoshiBridge(model, batch) if batch > 1 else MoshiBridge(model)


def main() -> int:
    return serve_main(build, prog=PROG, description=__doc__.split("\n")[0],
                      add_arguments=add_arguments)


if __name__ == "__main__":
    raise SystemExit(main())
