"""The estimate before a run (pytest_duplexact/spend/estimate.py): seconds to stream, wall time
and cost, checked by hand against the clip durations and the price table."""

from __future__ import annotations

import dataclasses
import json

import pytest

from pytest_duplexact.data.instance import bundled_root, load_dataset
from pytest_duplexact.data.taxonomy import OBSERVATION_PERIOD_S, Pipeline
from pytest_duplexact.pipelines import bargein, simulator
from pytest_duplexact.rules import requires
from pytest_duplexact.run.settings import RunSettings
from pytest_duplexact.spend.cost import load_prices
from pytest_duplexact.spend.estimate import Workload, describe, plan, stream_bounds, versus

# OpenAI's Realtime guide (our reading, prices.toml): 10 input / 20 output audio tokens a
# second, at the bundled per-token prices
IN_PER_S = 10 * 32e-6
OUT_PER_S = 20 * 64e-6


@pytest.fixture(scope="module")
def bundled():
    return load_dataset(bundled_root(), requires=requires).instances


def _by_hand(inst) -> tuple[float, float, float]:
    """The pipelines' own arithmetic, written out: (least, most streamed, output window)."""
    d = {role: clip.duration for role, clip in inst.clips.items()}
    if inst.pipeline is Pipeline.DIRECT:
        s = d["user"] + OBSERVATION_PERIOD_S
        return s, s, OBSERVATION_PERIOD_S
    if inst.pipeline is Pipeline.SIMULATOR:
        fixed = d["lead_in"] + d["cue"] + 8.0
        return fixed, fixed + 12.0 + 8.0, 8.0
    ack, ign = d.get("branch_acknowledged", 0.0), d.get("branch_ignored", 0.0)
    return (min(d["user"], ack) if ack else d["user"]) + 8.0, d["user"] + ign + ack + 8.0, 8.0


def test_the_windows_the_estimate_adds_are_the_pipelines(bundled):
    assert (simulator.OBSERVATION_S, simulator.MAX_WAIT_NO_SPEECH_S,
            simulator.MAX_WAIT_AFTER_SPEECH_S, bargein.OBSERVATION_S) == (8.0, 12.0, 8.0, 8.0)
    for inst in bundled:
        lo, hi, _ = _by_hand(inst)
        assert stream_bounds(inst) == pytest.approx((lo, hi)), inst.id
        assert lo <= hi


def test_direct_replay_streams_exactly_its_user_clip_and_the_observation_period(bundled):
    direct = [i for i in bundled if i.pipeline is Pipeline.DIRECT]
    assert direct
    for inst in direct:
        lo, hi = stream_bounds(inst)
        assert lo == hi == pytest.approx(inst.clips["user"].duration + 15.0)


def test_bundled_set_workload_and_gpt_realtime_cost_by_hand(bundled):
    lo = sum(_by_hand(i)[0] for i in bundled)
    hi = sum(_by_hand(i)[1] for i in bundled)
    out = sum(_by_hand(i)[2] for i in bundled)
    w = Workload.of(bundled)
    assert (w.instances, w.stream_s[0], w.stream_s[1], w.output_s) == (
        72, pytest.approx(lo, abs=1e-3), pytest.approx(hi, abs=1e-3), pytest.approx(out))
    est = plan(bundled, RunSettings(model="gpt-realtime"), prices=load_prices(),
               kind="streaming", billed_model=True, concurrency=16)
    assert est["wall_s"] == [pytest.approx(lo / 16, abs=0.1), pytest.approx(hi / 16, abs=0.1)]
    model = est["cost"]["services"]["model"]
    assert model["cost"] == [pytest.approx(lo * IN_PER_S, abs=1e-4),
                             pytest.approx(hi * IN_PER_S + out * OUT_PER_S, abs=1e-4)]
    # the text tokens are priced but no audio predicts them: said, and the total incomplete
    assert model["not_estimated"] == ["input_token_details.text_tokens",
                                      "output_token_details.text_tokens"]
    assert not est["cost"]["complete"]


def test_a_released_size_set_scales_linearly(bundled):
    """3,456 instances: the bundled set 48 times over (72 x 48), as the rehearsal does."""
    released = [dataclasses.replace(i, id=f"{i.id}-r{k}") for k in range(48) for i in bundled]
    assert len(released) == 3456
    one = plan(bundled, RunSettings(model="gpt-realtime"), prices=load_prices(),
               kind="streaming", billed_model=True, concurrency=16)
    big = plan(released, RunSettings(model="gpt-realtime"), prices=load_prices(),
               kind="streaming", billed_model=True, concurrency=16)
    assert big["instances"] == 3456
    assert big["stream_s"] == [pytest.approx(48 * s, rel=1e-6) for s in one["stream_s"]]
    assert big["cost"]["total"] == [pytest.approx(48 * c, rel=1e-3) for c in
                                    one["cost"]["total"]]
    hours_lo = big["stream_s"][0] / 3600
    assert 15 < hours_lo < 30  # "some 20 hours of streamed audio" (the figure)
    assert describe(big)[0].startswith("duplexact: estimate: 3,456 instances, ")
    # what the live sessions cost the harness's CPU, and the sessions per core it implies
    assert "harness CPU: about 14 ms per streamed second per live session" in describe(big)[1]
    assert "~71 sessions per core; 16 in flight take ~22% of a core" in describe(big)[1]


def test_stepped_and_local_models_bill_nothing_and_have_no_wall_clock(bundled):
    est = plan(bundled, RunSettings(model="oracle"), prices=load_prices(), kind="stepped",
               billed_model=False)
    assert est["wall_s"] is None and est["cost"]["total"] == [0.0, 0.0]
    assert est["cost"]["complete"]
    assert "as fast as the model computes" in describe(est)[0]
    assert not any("harness CPU" in line for line in describe(est))  # no wall clock


def test_one_instance_is_said_in_the_singular(bundled):
    est = plan(bundled[:1], RunSettings(model="oracle"), prices=load_prices(), kind="stepped",
               billed_model=False)
    assert describe(est)[0].startswith("duplexact: estimate: 1 instance, ")
    measured = {"instances": 1, "wall_s": 3.0}
    assert versus(est, measured).startswith("Estimate vs measured: 1 of 1 instance run by ")
    two = plan(bundled[:2], RunSettings(model="oracle"), prices=load_prices(), kind="stepped",
               billed_model=False)
    assert describe(two)[0].startswith("duplexact: estimate: 2 instances, ")
    assert versus(two, measured).startswith("Estimate vs measured: 1 of 2 instances run by ")


def test_unknown_prices_are_said_never_guessed(bundled):
    est = plan(bundled, RunSettings(model="grok-voice", judge="gpt-5.4"), prices=load_prices(),
               kind="streaming", billed_model=True)
    services = est["cost"]["services"]
    assert services["model"]["cost"] is None and "no price for 'grok-voice'" in \
        services["model"]["note"]
    assert services["text_judge"]["cost"] is None
    assert not est["cost"]["complete"]
    text = "\n".join(describe(est))
    assert "no price for 'grok-voice'" in text and "what could not be estimated" in text


def test_whisper_transcription_is_bounded_by_the_observation_windows(bundled):
    est = plan(bundled, RunSettings(model="oracle", transcriber="whisper-1"),
               prices=load_prices(), kind="stepped", billed_model=False)
    out = sum(_by_hand(i)[2] for i in bundled)
    assert est["cost"]["services"]["transcriber"]["cost"] == [
        0.0, pytest.approx(out * 0.0001, abs=1e-4)]


def test_a_stored_run_of_the_same_model_gives_its_cost_per_instance(bundled):
    prices = load_prices()
    previous = {"_name": "stored run 0002_gpt-realtime.json", "model": "gpt-realtime",
                "totals": {"instances": 10},
                "usage": {"model": {"model": "gpt-realtime",
                                    "input_token_details.audio_tokens": 1000,
                                    "output_token_details.audio_tokens": 500},
                          "text_judge": {"model": "gpt-4o", "input_tokens": 20_000,
                                         "output_tokens": 1_000}}}
    est = plan(bundled, RunSettings(model="gpt-realtime", judge="gpt-4o"), prices=prices,
               kind="streaming", billed_model=True, previous=previous)
    per_instance = (1000 * 32e-6 + 500 * 64e-6) / 10
    model = est["cost"]["services"]["model"]
    assert model["cost"] == [pytest.approx(72 * per_instance, abs=1e-4)] * 2
    assert "0002_gpt-realtime.json" in model["basis"]
    judge = est["cost"]["services"]["text_judge"]["cost"]
    assert judge == [pytest.approx(72 * (20_000 * 2.5e-6 + 1_000 * 10e-6) / 10, abs=1e-4)] * 2
    assert est["cost"]["complete"] and est["previous_run"] == previous["_name"]


def test_a_price_file_can_say_how_audio_becomes_tokens(tmp_path, bundled):
    f = tmp_path / "prices.toml"
    f.write_text('[models."my-voice"]\ntokens = 1e-5\n'
                 '[audio_rates."my-voice"]\ntokens = { audio = "in", per_s = 50 }\n')
    est = plan(bundled, RunSettings(model="my-voice"), prices=load_prices(f), kind="streaming",
               billed_model=True)
    lo, hi = est["stream_s"]
    assert est["cost"]["services"]["model"]["cost"] == [pytest.approx(lo * 50 * 1e-5, abs=1e-4),
                                                        pytest.approx(hi * 50 * 1e-5, abs=1e-4)]
    bad = tmp_path / "bad.toml"
    bad.write_text('[audio_rates."my-voice"]\ntokens = { audio = "sideways", per_s = 1 }\n')
    from pytest_duplexact.spend.cost import PriceError

    with pytest.raises(PriceError, match=r"bad.toml: field 'audio_rates.my-voice.tokens'"):
        load_prices(bad)


def test_the_estimate_is_plain_json(bundled):
    est = plan(bundled, RunSettings(model="gpt-realtime"), prices=load_prices(),
               kind="streaming", billed_model=True)
    assert json.loads(json.dumps(est)) == est


def test_the_sessions_a_machine_holds_come_from_a_stored_runs_measured_cpu(bundled):
    previous = {"_name": "stored run 0004_gpt-realtime.json", "model": "gpt-realtime",
                "measured": {"loop_cpu_ms_per_stream_s": 20.0}}
    est = plan(bundled, RunSettings(model="gpt-realtime"), prices=load_prices(),
               kind="streaming", billed_model=True, concurrency=64, previous=previous)
    assert est["loop_cpu_ms_per_stream_s"] == 20.0
    lines = describe({**est, "cores": 2})
    assert "about 20 ms per streamed second per live session (measured by stored run " \
           "0004_gpt-realtime.json)" in lines[1]
    # 70 % of a core at 20 ms a session: 35 per loop, 70 on two cores with -n 2
    assert "one pytest process (one event loop) holds ~35 live sessions on time, its 2 " \
           "cores ~70 with -n 2; 64 per process is more than one loop holds" in lines[2]
    without = plan(bundled, RunSettings(model="gpt-realtime"), prices=load_prices(),
                   kind="streaming", billed_model=True)
    assert without["loop_cpu_basis"] == "benchmarks/timing_under_load.py"
    stepped = plan(bundled, RunSettings(model="oracle"), prices=load_prices(), kind="stepped",
                   billed_model=False)
    assert "loop_cpu_ms_per_stream_s" not in stepped  # no live session: no figure


def test_the_concurrency_line_says_what_was_sustained_and_when_more_processes_would_hold():
    from pytest_duplexact.spend.estimate import concurrency_line

    def line(**measured):
        return concurrency_line({"wall_s": 1.0, "instances": 3, **measured})

    assert line() is None  # a run without trials in flight
    held = {"requested": 16, "sustained_p50": 16, "sustained_min": 16}
    assert line(concurrency=held, loop_cpu_ms_per_stream_s=5.0) == (
        "Concurrency: 16 requested per process, sustained 16 (p50) / 16 (min); loop CPU 5.0 ms "
        "per streamed second")
    lowered = {"requested": 256, "sustained_p50": 96, "sustained_min": 40}
    assert line(concurrency=lowered, loop_cpu_ms_per_stream_s=10.0).endswith(
        ": one event loop holds about 70 live sessions, so -n 4 (pytest-xdist, one loop per "
        "core) would hold 256 (docs/realtime.md, more than one core)")


def test_a_sub_second_duration_is_not_said_as_zero():
    from pytest_duplexact.spend.estimate import hours

    # --duplexact-max-wall=0.5s stopped a run with "wall-time limit of 0 s reached"
    assert [hours(s) for s in (0.5, 0.25, 0, 3, 59.6, 75, 4000)] == \
        ["0.5 s", "0.25 s", "0 s", "3 s", "60 s", "1 min", "1.1 h"]


@pytest.mark.parametrize("url,billed,off", [("http://127.0.0.1:8000/v1", False, "off"),
                                            ("http://localhost:8000/v1", False, "none"),
                                            ("https://api.together.xyz/v1", True, "OFF"),
                                            (None, True, "off")])
def test_a_judge_served_from_this_machine_bills_nothing(bundled, url, billed, off):
    """A local vLLM or Ollama judge has no price and needs none: the budget refused it
    ('no price for my-local-llm'). One at another address may be a paid provider."""
    est = plan(bundled, RunSettings(model="oracle", judge="my-local-llm",
                                    audio_judge=off, judge_base_url=url),
               prices=load_prices(), kind="stepped", billed_model=False)
    services = est["cost"]["services"]
    assert "audio_judge" not in services  # off / none: no judge, not a model of that name
    judge = services["text_judge"]
    if billed:
        assert judge["cost"] is None and "no price for 'my-local-llm'" in judge["note"]
    else:
        assert judge == {"model": "my-local-llm", "cost": [0.0, 0.0],
                         "basis": "local: nothing billed"}
        assert est["cost"]["complete"]
