"""What a run will take, before it starts: instances, seconds of audio to stream, the ideal
wall time and the expected cost of each billed service (docs/runs.md, "Before a run").

Everything here is a function of the selection (each instance's clip durations and its
pipeline's fixed windows), the price table (spend/prices.toml) and, when there is one, a
stored earlier run of the same model. No model is called and nothing is downloaded, so
``--duplexact-estimate`` works offline for any model.

Where a figure depends on what the model will do, it is a range, never a guess:

- seconds streamed: Direct Replay is exact (user clip + observation period); Simulator Replay
  waits for the model before the cue (between no wait and the simulator's two waiting
  limits); barge-in ends at a takeover or plays its branch clips.
- model output: from nothing to speech filling every observation window (the period after
  the user's part, where the actions are observed).
- a service priced by a counter the audio does not give (text tokens, judge tokens): taken
  from a stored run of the same model when there is one (its usage per instance, priced
  with today's table, "basis" names the run), else said to be unknown, and the total is
  then marked incomplete.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..data.taxonomy import OBSERVATION_PERIOD_S, Pipeline
from ..listen.transcribe import is_local
from ..pipelines import bargein as _bargein
from ..pipelines import simulator as _simulator

# CPU the streaming loop spends per second of audio streamed, per live session (resampling,
# the adapter's protocol, playback bookkeeping, the timing ticker): the most
# benchmarks/timing_under_load.py measured (gpt-realtime against the fake server, 8-32 in
# flight, docs/benchmarks.md). A CPU core streams at most about 1000 / it sessions on time,
# before scoring and the rest of the machine take their share.
LOOP_CPU_MS_PER_STREAM_S = 14.0
# the share of its core one event loop may spend on live sessions and stay punctual (the
# rest: scoring's share of this process, the ticker's wake-ups, the machine's other work)
LOOP_SHARE = 0.7


def sessions_per_loop(cpu_ms_per_stream_s: float) -> int:
    """Live sessions one event loop (one core, one pytest process) holds on time."""
    return max(1, int(1000 * LOOP_SHARE / cpu_ms_per_stream_s))


def stream_bounds(inst, branches: bool = True) -> tuple[float, float]:
    """(at least, at most) seconds of audio the pipeline streams to the model for ``inst``."""
    def dur(role: str) -> float:
        clip = inst.clips.get(role)
        return float(clip.duration) if clip is not None else 0.0

    kind = inst.pipeline
    if kind is Pipeline.DIRECT:
        s = dur("user") + OBSERVATION_PERIOD_S
        return s, s
    if kind is Pipeline.SIMULATOR:  # the cue waits for the model (pipelines/simulator.py)
        fixed = dur("lead_in") + dur("cue") + _simulator.OBSERVATION_S
        return fixed, fixed + _simulator.MAX_WAIT_NO_SPEECH_S + _simulator.MAX_WAIT_AFTER_SPEECH_S
    # barge-in (pipelines/bargein.py): a takeover with an acknowledged branch cuts the user
    # clip short; without a takeover an ignored branch talks on
    user, ack, ign = dur("user"), dur("branch_acknowledged"), dur("branch_ignored")
    if not branches:
        ack = ign = 0.0
    low = min(user, ack) if ack else user
    return low + _bargein.OBSERVATION_S, user + ign + ack + _bargein.OBSERVATION_S


def output_window(inst) -> float:
    """Seconds of the observation period after the instance's user part."""
    return OBSERVATION_PERIOD_S if inst.pipeline is Pipeline.DIRECT else (
        _simulator.OBSERVATION_S if inst.pipeline is Pipeline.SIMULATOR
        else _bargein.OBSERVATION_S)


@dataclass(frozen=True)
class Workload:
    """The selection as seconds: the sums over its instances."""

    instances: int
    stream_s: tuple[float, float]
    output_s: float  # observation windows: the most model output the estimate assumes

    @classmethod
    def of(cls, instances, branches: bool = True) -> "Workload":
        lo = hi = out = 0.0
        for inst in instances:
            a, b = stream_bounds(inst, branches)
            lo, hi, out = lo + a, hi + b, out + output_window(inst)
        return cls(len(instances), (round(lo, 3), round(hi, 3)), round(out, 3))


@dataclass(frozen=True)
class Service:
    """One service the run will use: its usage label (data/usage.py), its priced name, and
    whether it bills at all (a local model or the offline transcriber bills nothing)."""

    label: str
    model: str
    billed: bool


def priced_name(settings) -> str:
    """The name the model under test is priced by: its ``model`` option (the provider's
    model id, e.g. gpt-realtime's), else the model spec."""
    return dict(settings.model_options).get("model") or settings.model


def services_of(settings, billed_model: bool) -> list[Service]:
    """The services ``settings`` (run/settings.RunSettings) will call."""
    from ..remote.calls import turned_off
    from ..remote.netsafety import is_loopback_url

    out = [Service("model", priced_name(settings), billed_model)]
    # judges served from this machine (a local vLLM, llama.cpp, Ollama) bill nothing
    judged_here = is_loopback_url(getattr(settings, "judge_base_url", None))
    for label, model in (("text_judge", settings.judge), ("audio_judge", settings.audio_judge)):
        if model and not turned_off(model):  # "off": no judge, nothing billed
            out.append(Service(label, model, not judged_here))
    if settings.simulator == "llm" and settings.simulator_model:
        out.append(Service("simulator", settings.simulator_model, True))
    if not is_local(settings.transcriber):
        out.append(Service("transcriber", settings.transcriber, True))
    return out


def price_entry(prices: dict, model: str) -> dict | None:
    from .cost import model_key

    return prices["models"].get(model_key(model))


def _per_audio(prices: dict, model: str) -> dict:
    """``{counter: (direction, per_s)}``: how many of a priced counter one second of audio in
    ("in") or out ("out") makes (prices.toml ``[audio_rates]``, our reading of providers')."""
    from .cost import model_key

    rates = prices.get("audio_rates", {}).get(model_key(model), {})
    return {k: (v["audio"], float(v["per_s"])) for k, v in rates.items()}


def _from_audio(svc: Service, prices: dict, work: Workload) -> dict:
    """A service priced by audio seconds (directly, or through [audio_rates])."""
    entry = price_entry(prices, svc.model) or {}
    # seconds priced directly are one unit a second; a transcriber's audio_s is model speech
    direct = {"audio_in_s": ("in", 1.0), "audio_out_s": ("out", 1.0),
              **({"audio_s": ("out", 1.0)} if svc.label == "transcriber" else {})}
    rates = {**_per_audio(prices, svc.model), **direct}
    lo = hi = 0.0
    unknown = []
    for counter, price in entry.items():
        if counter not in rates:
            if price:  # a zero price (a sum of priced parts) changes no estimate
                unknown.append(counter)
            continue
        direction, per_s = rates[counter]
        if direction == "in":
            lo, hi = lo + work.stream_s[0] * per_s * price, hi + work.stream_s[1] * per_s * price
        else:
            hi += work.output_s * per_s * price
    basis = ("the model's speech, from none to filling every observation window"
             if svc.label == "transcriber" else
             "audio seconds: input as streamed; output from none to filling every "
             "observation window")
    out = {"model": svc.model, "cost": [round(lo, 4), round(hi, 4)], "basis": basis}
    if unknown:  # counted in the report when billed, but the audio does not predict them
        out["not_estimated"] = sorted(unknown)
    return out


def _from_previous(svc: Service, prices: dict, previous: dict, n: int) -> dict | None:
    """The stored run's usage of this service per instance, priced with today's table."""
    from .cost import estimate as price

    used = (previous.get("usage") or {}).get(svc.label)
    ran = (previous.get("totals") or {}).get("instances") or 0
    if not isinstance(used, dict) or used.get("model") != svc.model or not ran:
        return None
    cost = price({svc.label: used}, prices)["services"][svc.label]["cost"]
    if cost is None:
        return None
    each = cost / ran
    return {"model": svc.model, "cost": [round(each * n, 4)] * 2,
            "basis": f"{previous['_name']}: {each:.5f} per instance over {ran}"}


def plan(instances, settings, *, prices: dict, kind: str, billed_model: bool,
         concurrency: int = 1, workers: int = 1, previous: dict | None = None,
         branches: bool = True, kind_basis: str = "") -> dict:
    """The estimate of a run (``report.json``'s ``estimate``, docs/report-format.md).

    ``kind``: the model's "stepped", "streaming", "replay" or "unknown" (a factory function
    is only known once built); ``kind_basis``: what the kind rests on when the model's name
    alone does not say (a bridge's READY, a factory class), said with the wall time;
    ``workers``: pytest-xdist processes; ``previous``: a stored report of the same model (its
    ``_name`` says which), or None.
    """
    work = Workload.of(instances, branches)
    lanes = max(1, concurrency if kind != "stepped" else 1) * max(1, workers)
    wall = None
    if kind == "streaming":  # 1x real time: stream time over the trials in flight
        wall = [round(work.stream_s[0] / lanes, 1), round(work.stream_s[1] / lanes, 1)]
    services, total, complete = {}, [0.0, 0.0], True
    for svc in services_of(settings, billed_model):
        if not svc.billed:
            services[svc.label] = {"model": svc.model, "cost": [0.0, 0.0],
                                   "basis": "local: nothing billed"}
            continue
        entry = price_entry(prices, svc.model)
        got = _from_previous(svc, prices, previous, work.instances) if previous else None
        if got is None and entry is None:
            got = {"model": svc.model, "cost": None,
                   "note": f"no price for {svc.model!r} (add it with --duplexact-prices)"}
        elif got is None:
            got = _from_audio(svc, prices, work)
            if svc.label != "model" and "audio_s" not in (entry or {}):
                # judge tokens per call are not predictable from the audio
                got = {"model": svc.model, "cost": None,
                       "note": "priced, but its tokens per call are only known from an "
                               "earlier run: store one with --duplexact-autosave"}
        services[svc.label] = got
        if got["cost"] is None or got.get("not_estimated"):
            complete = False
        if got["cost"] is not None:
            total = [total[0] + got["cost"][0], total[1] + got["cost"][1]]
    return {
        "instances": work.instances,
        "stream_s": list(work.stream_s),
        "output_window_s": work.output_s,
        "model_kind": kind,
        **({"model_kind_basis": kind_basis} if kind_basis else {}),
        "concurrency": concurrency,
        "workers": workers,
        "wall_s": wall,
        "cost": {"currency": prices.get("currency", "USD"), "as_of": prices.get("as_of"),
                 "source": prices.get("source", "bundled"), "services": services,
                 "total": [round(total[0], 4), round(total[1], 4)], "complete": complete},
        "previous_run": previous["_name"] if previous else None,
        **(_loop_cpu(previous) if kind == "streaming" else {}),
    }


def _loop_cpu(previous: dict | None) -> dict:
    """What a live session costs this process's event loop, and the cores there are: measured
    by the stored run when it streamed with --duplexact-concurrency, else the benchmark's
    figure."""
    import os

    got = ((previous or {}).get("measured") or {}).get("loop_cpu_ms_per_stream_s")
    measured = isinstance(got, (int, float)) and not isinstance(got, bool) and got > 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"loop_cpu_ms_per_stream_s": float(got) if measured else LOOP_CPU_MS_PER_STREAM_S,
            "loop_cpu_basis": (f"measured by {previous['_name']}" if measured else
                               "benchmarks/timing_under_load.py"),
            "cores": cores or 1}


def _span(lo: float, hi: float, unit: str = "", digits: int = 2) -> str:
    a, b = f"{lo:,.{digits}f}", f"{hi:,.{digits}f}"
    return (a if a == b else f"{a}-{b}") + unit


def hours(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    if 0 < seconds < 1:  # a sub-second limit read as "0 s"
        return f"{seconds:.2g} s"
    return f"{seconds:.0f} s"


def _hours_span(lo: float, hi: float) -> str:
    a, b = hours(lo), hours(hi)
    return a if a == b else f"{a} - {b}"


def describe(est: dict) -> list[str]:
    """The header line, and one line per service that bills or could not be estimated."""
    lo, hi = est["stream_s"]
    kind = est["model_kind"]
    if est["wall_s"] is not None:
        wall = (f"ideal wall {_hours_span(*est['wall_s'])} at {est['concurrency']} in flight"
                + (f" x {est['workers']} workers" if est["workers"] > 1 else ""))
    elif kind == "stepped":
        wall = "wall: as fast as the model computes (stepped)"
    elif kind == "replay":
        wall = "wall: no model calls (replay)"
    else:  # streaming at the run's concurrency, or stepped: the model says once built
        lanes = max(1, est["concurrency"]) * max(1, est["workers"])
        wall = (f"wall: {_hours_span(lo / lanes, hi / lanes)} at {est['concurrency']} in "
                "flight" + (f" x {est['workers']} workers" if est["workers"] > 1 else "")
                + " if it streams, as fast as it computes if it steps")
    if est.get("model_kind_basis"):
        wall += f" ({est['model_kind_basis']})"
    cost = est["cost"]
    cur = cost["currency"]
    t = cost["total"]
    money = f"cost {_span(t[0], t[1], ' ' + cur)}" + ("" if cost["complete"] else
                                                       " + what could not be estimated")
    head = (f"duplexact: estimate: {_instances(est['instances'])}, {_hours_span(lo, hi)} of "
            f"audio to stream; {wall}; {money}")
    lines = [head]
    if kind == "streaming":
        lanes = est["concurrency"] * max(1, est["workers"])
        cpu = est.get("loop_cpu_ms_per_stream_s", LOOP_CPU_MS_PER_STREAM_S)
        basis = est.get("loop_cpu_basis", "benchmarks/timing_under_load.py")
        cores, holds = est.get("cores", 1), sessions_per_loop(cpu)
        lines.append(f"    harness CPU: about {cpu:.0f} ms per streamed second per live session "
                     f"({basis}): at most ~{1000 / cpu:.0f} sessions per core; {lanes} in "
                     f"flight take ~{lanes * cpu / 10:.0f}% of a core before scoring (keep "
                     "headroom: docs/realtime.md, timing integrity)")
        lines.append(f"    this machine: one pytest process (one event loop) holds ~{holds} "
                     f"live sessions on time" + (
                         f", its {cores} cores ~{holds * cores} with -n {cores}"
                         if cores > 1 else "") + (
                         f"; {est['concurrency']} per process is more than one loop holds: "
                         "the run lowers it to what it sustains (measured.concurrency)"
                         if est["concurrency"] > holds else ""))
    for label, s in cost["services"].items():
        if s["cost"] == [0.0, 0.0] and "note" not in s:
            continue
        what = label.replace("_", " ")
        if s["cost"] is None:
            lines.append(f"    {what} {s['model']}: {s['note']}")
        else:
            extra = (f"; not estimated: {', '.join(s['not_estimated'])}"
                     if s.get("not_estimated") else "")
            lines.append(f"    {what} {s['model']}: {_span(*s['cost'], ' ' + cur)} "
                         f"({s['basis']}{extra})")
    if any(s["cost"] not in (None, [0.0, 0.0]) for s in cost["services"].values()):
        lines.append(f"    prices: {cost['source']}, as of {cost['as_of']} (our reading of the "
                     "providers' pages: check them)")
    return lines


def _instances(n: int) -> str:
    """``1 instance``, ``3,456 instances``."""
    return f"{n:,} instance{'' if n == 1 else 's'}"


def versus(est: dict | None, got: dict | None) -> str | None:
    """One line: a report's ``estimate`` beside what the run ``measured`` (terminal,
    Markdown); None unless it has both."""
    if not est or not got:
        return None
    cur = est["cost"]["currency"]
    parts = [f"Estimate vs measured: {got['instances']:,} of {_instances(est['instances'])} run "
             "by this invocation"]
    if est["wall_s"] is not None:
        parts.append(f"wall {_hours_span(*est['wall_s'])} estimated for all, "
                     f"{hours(got['wall_s'])} measured")
    else:
        parts.append(f"wall {hours(got['wall_s'])} measured")
    t = est["cost"]["total"]
    if got.get("cost") is not None:
        parts.append(f"cost {_span(t[0], t[1], ' ' + cur)} estimated for all, "
                     f"{got['cost']:.2f} {cur} measured")
    return "; ".join(parts)


def concurrency_line(got: dict | None) -> str | None:
    """One line: the concurrency the run sustained (a report's ``measured.concurrency``) and,
    when one event loop could not hold what was asked, how many pytest processes would
    (terminal, Markdown)."""
    got = got or {}
    conc, cpu = got.get("concurrency"), got.get("loop_cpu_ms_per_stream_s")
    if not conc:
        return None
    asked = conc["requested"]
    line = (f"Concurrency: {asked} requested per process, sustained {conc['sustained_p50']} "
            f"(p50) / {conc['sustained_min']} (min)")
    if cpu:
        line += f"; loop CPU {cpu:.1f} ms per streamed second"
        holds = sessions_per_loop(cpu)
        if conc["sustained_min"] < asked and holds < asked:
            line += (f": one event loop holds about {holds} live sessions, so -n "
                     f"{-(-asked // holds)} (pytest-xdist, one loop per core) would hold "
                     f"{asked} (docs/realtime.md, more than one core)")
    return line


def combine(estimates: list[dict]) -> dict:
    """The shards' estimates of one run summed (``duplexact merge``): instances, seconds and
    each service's cost range; a service any shard could not estimate stays unestimated."""
    first = estimates[0]

    def add(a, b):
        return None if a is None or b is None else [round(a[0] + b[0], 4), round(a[1] + b[1], 4)]

    services: dict = {}
    for est in estimates:
        for label, svc in est["cost"]["services"].items():
            have = services.get(label)
            services[label] = dict(svc) if have is None else {**have,
                                                              "cost": add(have["cost"],
                                                                          svc["cost"])}
    walls = [e["wall_s"] for e in estimates]
    return {**first,
            "instances": sum(e["instances"] for e in estimates),
            "stream_s": [round(sum(e["stream_s"][k] for e in estimates), 3) for k in (0, 1)],
            "output_window_s": round(sum(e["output_window_s"] for e in estimates), 3),
            "workers": sum(e["workers"] for e in estimates),
            "wall_s": None if None in walls else [max(w[k] for w in walls) for k in (0, 1)],
            "cost": {**first["cost"], "services": services,
                     "total": [round(sum(e["cost"]["total"][k] for e in estimates), 4)
                               for k in (0, 1)],
                     "complete": all(e["cost"]["complete"] for e in estimates)},
            "previous_run": first["previous_run"] if len({e["previous_run"] for e in
                                                          estimates}) == 1 else None}
