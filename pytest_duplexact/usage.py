"""What the remote services cost: models used, calls made, answers from the cache.

Each process measures the change in its services' counters around each instance; the change
rides on the instance's report (like the outcome), so the controller's totals are the same
with or without xdist."""

from __future__ import annotations

SERVICES = ("text_judge", "audio_judge", "simulator", "transcriber")


def _services(harness) -> dict:
    panel = getattr(harness, "panel", None)
    return {"text_judge": getattr(panel, "text", None),
            "audio_judge": getattr(panel, "audio", None),
            "simulator": getattr(harness, "policy", None),
            "transcriber": getattr(harness, "transcriber", None)}


def snapshot(harness) -> dict:
    out = {}
    for label, obj in _services(harness).items():
        if obj is None:
            continue
        counters = getattr(obj, "counters", None)
        name = getattr(obj, "model", None) or getattr(obj, "name", None) or type(obj).__name__
        out[label] = {"model": str(name), **(counters.as_dict() if counters is not None else {})}
    return out


def delta(after: dict, before: dict) -> dict:
    out = {}
    for label, now in after.items():
        was = before.get(label, {})
        out[label] = {k: (v - was.get(k, 0) if isinstance(v, int) else v)
                      for k, v in now.items()}
    return out


def total(deltas) -> dict:
    """Sum of per-instance deltas, keyed by service, in SERVICES order."""
    acc: dict[str, dict] = {}
    for d in deltas:
        for label, vals in d.items():
            slot = acc.setdefault(label, {})
            for k, v in vals.items():
                slot[k] = slot.get(k, 0) + v if isinstance(v, int) else v
    return {k: acc[k] for k in SERVICES if k in acc}


def describe(usage: dict) -> list[str]:
    lines = []
    for label, vals in usage.items():
        counts = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in vals.items()
                           if k != "model" and isinstance(v, int))
        lines.append(f"  {label.replace('_', ' ')}: {vals.get('model')}"
                     + (f" ({counts})" if counts else " (local, no calls)"))
    return lines
