"""The interaction pipelines (SPEC §7) and ``run_instance``, which picks one per instance.

=================  ==========================================  ==================
taxonomy pipeline  actions                                     class
=================  ==========================================  ==================
direct             wait, ignore, take_turn, backchannel        ``DirectReplay``
simulator          stop, hold_floor, recover                   ``SimulatorReplay``
barge_in           interrupt                                   ``BargeInReplay``
=================  ==========================================  ==================

Each pipeline is written once against ``Duplex``; ``run_instance`` opens the right session
for the model (``SteppedDuplex`` for stepped models, ``StreamingDuplex`` for hosted ones) or,
for ``recorded:DIR``, returns the stored trial without running anything.
"""

from __future__ import annotations

import inspect
from dataclasses import replace
from typing import Any, Awaitable, Callable, Union

from ..data.annotations import Instance
from ..data.taxonomy import Pipeline
from ..models import is_recorded, is_stepped, is_streaming
from ..models.adapter import traits
from ..models.contract import SessionInfo
from .bargein import BargeInReplay
from .direct import DirectReplay
from .duplex import Duplex, Recording
from .policy import SimulatorPolicy
from .simulator import RuleBasedSimulator, SimulatorReplay
from .stepped import SteppedDuplex

DuplexFactory = Callable[[SessionInfo], Union[Duplex, Awaitable[Duplex]]]


def pipeline_for(instance: Instance, policy: SimulatorPolicy | None = None,
                 branches: bool = True):
    kind = instance.pipeline
    if kind is Pipeline.DIRECT:
        return DirectReplay()
    if kind is Pipeline.SIMULATOR:
        return SimulatorReplay(policy or RuleBasedSimulator())
    if kind is Pipeline.BARGE_IN:
        return BargeInReplay(branches=branches)
    raise ValueError(f"instance {instance.id}: no pipeline for {kind!r}")


async def open_duplex(model: Any, info: SessionInfo) -> Duplex:
    """A session for ``model``: a stepped or streaming model, or a factory
    ``(SessionInfo) -> Duplex`` (possibly async) for anything else."""
    if is_stepped(model):
        return SteppedDuplex(model, info)
    if is_streaming(model):
        from .streaming_duplex import StreamingDuplex

        return await StreamingDuplex.open(model, info)
    if callable(model):
        duplex = model(info)
        return await duplex if inspect.isawaitable(duplex) else duplex
    raise TypeError(f"cannot open a session for {type(model).__name__}: not a stepped or "
                    "streaming model, nor a factory of Duplex sessions (docs/models.md)")


async def _discard(duplex: Duplex) -> None:
    """Release a session whose trial failed; its own errors would hide the real one."""
    try:
        abort = getattr(duplex, "abort", None)
        if abort is not None:
            abort()
        else:
            await duplex.close()
    except Exception:
        pass


async def _run_once(instance: Instance, model: Any, info: SessionInfo,
                    policy: SimulatorPolicy | None, branches: bool = True,
                    spent: list | None = None, channel: Any = None) -> Recording:
    duplex = await open_duplex(model, info)
    try:
        if channel is not None and not channel.clean:
            from .channelled import ChannelledDuplex

            duplex = ChannelledDuplex(duplex, channel, info)
        return await pipeline_for(instance, policy, branches).run(duplex, instance)
    except BaseException:
        await _discard(duplex)
        raise
    finally:
        if spent is not None:  # this attempt's provider usage, also when it failed
            spent.append(getattr(duplex, "usage", None))


async def run_instance(instance: Instance, model: Any, info: SessionInfo | None = None, *,
                       policy: SimulatorPolicy | None = None,
                       branches: bool = True, channel: Any = None) -> Recording:
    """Run one trial of ``instance`` and return its Recording.

    ``model``: a stepped or streaming model, a ``recorded:DIR`` model, or a Duplex factory.
    ``info``: the SessionInfo (default: the instance, seed 0, no options).
    ``policy``: the cue-timing policy for Simulator Replay (default: ``RuleBasedSimulator``).
    ``branches``: barge-in plays the instance's branch clips when it has them (bargein.py).
    ``channel``: what the model hears through (a ``channel.Channel``; None or clean: as is).
    Model failures raise ``ModelError``; a streaming trial that fails transiently (dropped
    connection, rate limit) is retried from scratch (pipelines/streaming_duplex.py), and so is a
    stepped one of a model with ``retries_transient`` (models/bridge.py). What every
    session of the trial reported (tokens, audio seconds) is the recording's ``usage``, or
    the raised error's ``usage`` when the trial failed.
    """
    if is_recorded(model):
        return model.recording_for(instance)
    info = info or SessionInfo(instance)
    if info.instance is not instance:
        raise ValueError(f"SessionInfo is for instance {info.instance.id}, not {instance.id}")
    # a stepped model across a network (the bridge client) may fail transiently too
    if is_streaming(model) or traits(model).retries_transient:
        from ..data.usage import add_counts
        from .streaming_duplex import run_with_retry

        spent: list = []
        try:
            recording = await run_with_retry(lambda: _run_once(instance, model, info, policy,
                                                               branches, spent, channel))
        except Exception as e:  # its sessions were billed all the same: the harness charges
            e.usage = add_counts(getattr(e, "usage", None), *spent)  # what the error carries
            raise
        return replace(recording, usage=add_counts(*spent))
    return await _run_once(instance, model, info, policy, branches, channel=channel)


__all__ = [
    "BargeInReplay", "DirectReplay", "Duplex", "DuplexFactory", "Recording",
    "RuleBasedSimulator", "SimulatorReplay", "SteppedDuplex", "open_duplex", "pipeline_for",
    "run_instance",
]
