"""ONNX Runtime vs TorchScript for the VAD's network (pytest_duplexact/vad_network.py).

Runs both backends on every bundled clip, on every bundled clip under each condition of the
noise grid (pytest_duplexact/degrade.py), and on the oracle's and endpoint's outputs for the
bundled instances, as the harness runs the VAD (quiet stretches skipped). Counts tracks whose
raw spans differ, the largest per-frame probability difference, and each backend's network
speed in multiples of real time per core. Part ``backends`` of benchmarks/harness_performance.py;
alone:

    python -m benchmarks.vad_backends [--quick]
"""

from __future__ import annotations

import asyncio
import json
import sys

import numpy as np

from benchmarks._common import Clock, load_average
from pytest_duplexact.data import audio
from pytest_duplexact.data.instance import bundled_root, load_dataset
from pytest_duplexact.listen import degrade, vad, vad_network
from pytest_duplexact.rules import requires


def tracks(quick: bool) -> list[tuple[str, str, np.ndarray]]:
    """(group, label, 16 kHz audio): clips, clips under each grid condition, model outputs."""
    from pytest_duplexact.models import resolve_model
    from pytest_duplexact.models.contract import SessionInfo
    from pytest_duplexact.pipelines import run_instance

    ds = load_dataset(bundled_root(), requires=requires)
    clips, seen = [], set()
    for inst in ds.instances:
        for clip in inst.clips.values():
            if clip.path not in seen:
                seen.add(clip.path)
                clips.append((clip.path.name, vad.as_mono(clip.load(), audio.SAMPLE_RATE)))
    out = [("clean clips", name, x) for name, x in clips]
    for cond in degrade.GRID:
        if cond != "clean":
            for k, (name, x) in enumerate(clips[:: 4 if quick else 1]):
                out.append((cond, name, degrade.apply(cond, x, seed=k)))
    for model_name in ("oracle", "endpoint"):
        model = resolve_model(model_name)
        for inst in ds.instances[:: 6 if quick else 1]:
            rec = asyncio.run(run_instance(inst, model, SessionInfo(inst)))
            out.append((f"{model_name} outputs", inst.id, rec.output))
    return out


def compare(quick: bool) -> dict:
    load0 = load_average()
    data = tracks(quick)
    skip = vad.DEFAULT_PARAMS.skip_quiet_ms
    probs, clocks = {}, {}
    for backend in vad_network.BACKENDS:
        (vad_network._session if backend == "onnx" else vad_network._torch)()  # warm
        with Clock() as clock:
            probs[backend] = [vad.speech_probabilities(x, skip, backend) for _, _, x in data]
        clocks[backend] = clock
    groups: dict[str, dict] = {}
    for i, (group, label, x) in enumerate(data):
        g = groups.setdefault(group, {"tracks": 0, "audio_s": 0.0, "differing": [],
                                      "max_prob_diff": 0.0})
        g["tracks"] += 1
        g["audio_s"] += len(x) / vad.VAD_SAMPLE_RATE
        a, b = probs["onnx"][i], probs["torch"][i]
        g["max_prob_diff"] = max(g["max_prob_diff"], float(np.abs(a - b).max(initial=0.0)))
        if vad.postprocess(x, a) != vad.postprocess(x, b):
            g["differing"].append(label)
    seconds = sum(len(x) for _, _, x in data) / vad.VAD_SAMPLE_RATE
    for g in groups.values():
        g["audio_s"] = round(g["audio_s"], 1)
        g["max_prob_diff"] = float(f"{g['max_prob_diff']:.2g}")
    return {
        "tracks": len(data), "audio_s": round(seconds, 1),
        "tracks_differing": sum(len(g["differing"]) for g in groups.values()),
        "groups": groups,
        "network_cpu_s": {b: round(c.cpu, 2) for b, c in clocks.items()},
        "network_x_realtime_per_core": {b: round(seconds / max(c.cpu, 1e-9), 1)
                                        for b, c in clocks.items()},
        "onnx_speedup": round(clocks["torch"].cpu / max(clocks["onnx"].cpu, 1e-9), 2),
        "load_average": {"before": load0, "after": load_average()},
    }


def lines(r: dict) -> list[str]:
    x = r["network_x_realtime_per_core"]
    out = [f"\nVAD network backends on {r['tracks']} tracks ({r['audio_s']} s, quiet skipped): "
           f"onnx {x['onnx']}x, torch {x['torch']}x real time per core ({r['onnx_speedup']}x); "
           f"tracks with different spans: {r['tracks_differing']}"]
    for name, g in r["groups"].items():
        out.append(f"    {name:<16} {g['tracks']:>4} tracks {g['audio_s']:>7.1f} s: "
                   f"{len(g['differing'])} differ, max |p_onnx - p_torch| {g['max_prob_diff']}"
                   + (f" ({', '.join(g['differing'][:3])})" if g["differing"] else ""))
    return out


if __name__ == "__main__":
    result = compare("--quick" in sys.argv)
    print("\n".join(lines(result)))
    print(json.dumps({k: v for k, v in result.items() if k != "groups"}, indent=1))
