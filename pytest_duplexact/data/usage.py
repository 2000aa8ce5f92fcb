"""What the remote services cost: models used, calls made, answers from the cache.

Each process measures the change in its services' counters around each instance; the change
rides on the instance's report (like the outcome), so the controller's totals are the same
with or without xdist.

The model under test is one of the services: a streaming session may expose ``usage``, a
dict of numbers its provider reported (tokens, audio seconds; models/streaming.py). Every
attempt's usage rides on the trial's ``Recording.usage`` and is charged to the ``model``
service when the harness takes the recording, so a trial recorded ahead of time
(``--duplexact-concurrency``) is still counted with its own instance."""

from __future__ import annotations

from dataclasses import dataclass, field

SERVICES = ("model", "text_judge", "audio_judge", "simulator", "transcriber")


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def add_counts(*counts: dict | None) -> dict:
    """Key-wise sum of dicts of numbers (floats rounded to the microsecond/millitoken)."""
    out: dict = {}
    for c in counts:
        for k, v in (c or {}).items():
            if _number(v):
                out[k] = out.get(k, 0) + v
    return {k: round(v, 6) if isinstance(v, float) else v for k, v in out.items()}


@dataclass
class _Counts:
    values: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return dict(self.values)


@dataclass
class ModelUsage:
    """The model under test as a service: what its provider reported, summed over trials."""

    model: str
    counters: _Counts = field(default_factory=_Counts)


def charge_model(harness, recording) -> None:
    """Add a trial's ``Recording.usage`` to the harness's ``model`` service."""
    spent = getattr(recording, "usage", None)
    if not spent:
        return
    ledger = getattr(harness, "model_usage", None)
    if ledger is None:
        name = getattr(getattr(harness, "model", None), "name", None)  # e.g. the provider's id
        ledger = harness.model_usage = ModelUsage(str(name or getattr(harness, "model_name",
                                                                      "model")))
    ledger.counters.values = add_counts(ledger.counters.values, spent)


def _services(harness) -> dict:
    panel = getattr(harness, "panel", None)
    return {"model": getattr(harness, "model_usage", None),
            "text_judge": getattr(panel, "text", None),
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
        for key in ("endpoint", "endpoint_url"):  # whose server answered (remote clients)
            value = getattr(obj, key, None)
            if isinstance(value, str):
                out[label][key] = value
    return out


def delta(after: dict, before: dict) -> dict:
    out = {}
    for label, now in after.items():
        was = before.get(label, {})
        out[label] = {k: (_round(v - was.get(k, 0)) if _number(v) else v)
                      for k, v in now.items()}
    return out


def _round(v):
    return round(v, 6) if isinstance(v, float) else v


def total(deltas) -> dict:
    """Sum of per-instance deltas, keyed by service, in SERVICES order."""
    acc: dict[str, dict] = {}
    for d in deltas:
        for label, vals in d.items():
            slot = acc.setdefault(label, {})
            for k, v in vals.items():
                slot[k] = _round(slot.get(k, 0) + v) if _number(v) else v
    return {k: acc[k] for k in SERVICES if k in acc}


def _fmt(v) -> str:
    return f"{v:.1f}" if isinstance(v, float) else str(v)


def _counts(vals: dict) -> str:
    return ", ".join(f"{k.replace('_', ' ')} {_fmt(v)}" for k, v in vals.items()
                     if k != "model" and _number(v))


def all_local(usage: dict) -> bool:
    """No service of the run counted anything: each ran on this machine, none was called."""
    return not any(_counts(vals) for vals in usage.values())


def describe(usage: dict) -> list[str]:
    """The services' lines; a run whose services were all local gets one line, not a list
    under a heading that promises remote ones."""
    if all_local(usage):
        names = ", ".join(f"{label.replace('_', ' ')} {vals.get('model')}"
                          for label, vals in usage.items())
        return [f"Services: {names} (all local: no remote calls, nothing to pay)"]
    lines = ["Remote services (models used, calls, cache):"]
    for label, vals in usage.items():
        counts = _counts(vals)
        lines.append(f"  {label.replace('_', ' ')}: {vals.get('model')}"
                     + (f" ({counts})" if counts else " (local, no calls)"))
    return lines

