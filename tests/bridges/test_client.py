"""The plugin's bridge client (models/providers/bridge.py) against the scripted bridge
(tests/fakes/bridge_server.py: the real kit in its own process on 127.0.0.1), below the
pytest layer: stepped runs are compared sample for sample with the same model in process;
streaming runs are short (they run at 1x)."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_duplexact.models import resolve_model
from pytest_duplexact.models.contract import ModelError, SessionInfo
from pytest_duplexact.models.model_options import ModelConfigError
from pytest_duplexact.models.providers.endpoint import EndpointModel
from pytest_duplexact.models.streaming_contract import TransientModelError
from pytest_duplexact.pipelines import run_instance
from pytest_duplexact.pipelines.bargein import BargeInReplay
from pytest_duplexact.pipelines.direct import DirectReplay
from pytest_duplexact.pipelines.streaming_duplex import StreamingDuplex
from tests.bridges.support import scripted_server
from tests.pipelines.helpers import cat, direct_instance, gap, run, simulator_instance, spans, tone
from tests.support.builders import make_instance
from tests.support.realtime import load_allowance
from tests.support.servers import threaded


def bridge(url: str, **options):
    return resolve_model("bridge", url=url, **options)


def trial(model, instance, seed: int = 0):
    return run(run_instance(instance, model, SessionInfo(instance, seed)))


@pytest.fixture(scope="module")
def endpoint_url():
    with scripted_server({"model": "endpoint"}) as url:
        yield url


@pytest.mark.parametrize("make", [
    lambda tmp: direct_instance(tmp, "take_turn", "immediate"),
    lambda tmp: simulator_instance(tmp, "stop", "direct_interruption"),
    lambda tmp: direct_instance(tmp, "interrupt", "help"),
], ids=["direct", "simulator", "barge-in"])
def test_stepped_bridge_hears_what_the_model_in_process_says(endpoint_url, tmp_path, make):
    instance = make(tmp_path)
    model = bridge(endpoint_url)
    assert (model.sample_rate, model.frame_size, model.name) == (16_000, 320, "scripted-endpoint")
    through, local = trial(model, instance), trial(EndpointModel(), instance)
    assert spans(local.output), "the endpoint said nothing: the comparison would be empty"
    # the same samples: every onset is where it is in process, to the sample
    np.testing.assert_array_equal(through.output, local.output)
    np.testing.assert_array_equal(through.input, local.input)
    assert through.user_sent_until == local.user_sent_until
    # the words arrive as TEXT in the frame they start in: the same words, at its start
    assert [w.text for w in through.transcript] == [w.text for w in local.transcript]
    for w, ref in zip(through.transcript, local.transcript):
        assert -1e-6 <= ref.start - w.start < 0.02 + 1e-6, (w, ref)


@pytest.mark.parametrize("fault, says, cls", [
    ({"error_at_step": 5}, "error at step 5 (0.40 s): model scripted-at failed in step 5 at "
                           "0.40 s: RuntimeError: scripted failure", ModelError),
    ({"end_at_step": 5}, "ended the trial at step 5 (0.40 s), before its end (CLOSE): "
                         "scripted end of session", ModelError),
    ({"short_at_step": 3}, "returned 1919 samples in step 3; a stepped model returns exactly "
                           "1920", ModelError),
])
def test_a_fault_mid_trial_is_a_model_error(tmp_path, fault, says, cls):
    instance = direct_instance(tmp_path, "take_turn", "immediate")
    with scripted_server(fault) as url:
        with pytest.raises(cls) as e:
            trial(bridge(url), instance)
    assert says in str(e.value)
    assert not isinstance(e.value, TransientModelError)  # the same trial would fail again


def test_a_server_that_stops_answering_hits_the_step_deadline(tmp_path):
    instance = direct_instance(tmp_path, "take_turn", "immediate")
    with scripted_server({"stall_at_step": 2}) as url:
        model = bridge(url, step_timeout="1", close_timeout="0.5")
        with pytest.raises(ModelError, match=r"no answer to step 2 \(0.16 s\) from the server "
                                             r"within 1 s \(step_timeout\)"):
            trial(model, instance)


def test_an_unreachable_or_refusing_server_fails_before_any_instance(monkeypatch):
    with scripted_server() as url:
        with pytest.raises(ModelConfigError, match="refused the trial: cannot start the trial: "
                                                   "ValueError: unknown option.s. temp"):
            bridge(url, temp="0.7")
    # the port is closed now
    with pytest.raises(ModelConfigError, match="could not connect.*is the bridge running"):
        bridge(url, connect_timeout="5")


def test_the_key_is_required_sent_and_never_shown(monkeypatch):
    key = "bridge-key-never-shown-0123"
    with scripted_server(env={"DUPLEXACT_BRIDGE_API_KEY": key}) as url:
        monkeypatch.delenv("DUPLEXACT_BRIDGE_API_KEY", raising=False)
        with pytest.raises(ModelConfigError, match="refused the key .HTTP 401.") as e:
            bridge(url)
        monkeypatch.setenv("DUPLEXACT_BRIDGE_API_KEY", "wrong")
        with pytest.raises(ModelConfigError, match="HTTP 401"):
            bridge(url)
        monkeypatch.setenv("DUPLEXACT_BRIDGE_API_KEY", key)
        model = bridge(url)
        assert key not in repr(vars(model)) and key not in str(e.value)
    # never over plain ws:// to another machine
    with pytest.raises(ModelConfigError, match="refusing to send DUPLEXACT_BRIDGE_API_KEY over "
                                               "unencrypted ws:// to 10.1.2.3"):
        bridge("ws://10.1.2.3:8765")


def test_bad_client_options():
    with pytest.raises(ModelConfigError, match="no server"):
        resolve_model("bridge")
    with pytest.raises(ModelConfigError, match="step_timeout: expected float"):
        bridge("ws://127.0.0.1:1", step_timeout="soon")
    with pytest.raises(ModelConfigError, match="run_seed is set by the client"):
        bridge("ws://127.0.0.1:1", run_seed="3")
    with pytest.raises(ModelConfigError, match="must start with ws:// or wss://"):
        bridge("http://127.0.0.1:1")


# --- streaming (1x real time: short) ------------------------------------------------------------

def streamed(model, instance, replay):
    async def go():
        duplex = await StreamingDuplex.open(model, SessionInfo(instance))
        return await replay.run(duplex, instance)

    return run(go())


def test_streaming_direct_words_and_onset(tmp_path):
    instance = direct_instance(tmp_path, "take_turn", "immediate")  # 3 s
    with scripted_server({"model": "at", "mode": "streaming", "speak_at_s": 0.5}) as url:
        model = bridge(url)
        assert (model.input_sample_rate, model.output_sample_rate) == (24_000, 24_000)
        rec = streamed(model, instance, DirectReplay(observation_s=0.3))
    onset = spans(rec.output)[0][0]
    # each frame is answered once it has all arrived: one 80 ms frame late, plus the loop
    # (and the stalls it measured on a loaded machine)
    assert 0.5 <= onset < 0.5 + 0.08 + 0.5 + load_allowance(rec), (onset, rec.clock)
    texts = [w.text for w in rec.transcript]
    assert texts[:4] == ["Okay", "thanks", "for", "telling"]
    first = rec.transcript[0]
    assert abs(first.start - onset) < 0.1, (first, onset)  # timed by the audio it came with


def test_streaming_barge_in_cuts_the_user(tmp_path):
    """The model speaks over the user from 0.5 s: a takeover, so the rest of the user's clip
    is not sent."""
    instance = make_instance(tmp_path, "interrupt", "help", {"user": cat(gap(0.2), tone(3.0))},
                             {"user_start": 0.2})
    with scripted_server({"model": "at", "mode": "streaming", "speak_at_s": 0.5}) as url:
        rec = streamed(bridge(url), instance, BargeInReplay(observation_s=0.3, branches=False))
    assert rec.user_sent_until is not None and rec.user_sent_until < 3.2 - 0.5
    assert any("takeover" in what for _, what in rec.events)


def test_streaming_error_is_a_model_error(tmp_path):
    instance = direct_instance(tmp_path, "take_turn", "immediate")
    with scripted_server({"mode": "streaming", "error_at_step": 3}) as url:
        with pytest.raises(ModelError, match="scripted failure") as e:
            trial(bridge(url), instance)
    assert "gave up after" not in str(e.value)  # final: not retried


def test_a_streaming_server_that_ends_the_trial_early_is_a_model_error(tmp_path):
    instance = direct_instance(tmp_path, "take_turn", "immediate")
    with scripted_server({"mode": "streaming", "end_at_step": 3}) as url:
        with pytest.raises(ModelError, match=r"ended the trial before its end \(CLOSE\) "
                                             r"\(scripted end of session\)") as e:
            trial(bridge(url), instance)
    assert not isinstance(e.value, TransientModelError)


def test_a_server_answering_the_wrong_frame_size_is_a_clear_error():
    """A bridge of someone else's making (not our kit) that breaks the stepped rule."""
    from websockets.sync.server import serve

    from pytest_duplexact.bridges import wire

    def handler(ws):
        ws.send(wire.Ready("stepped", 24_000, 1920, False, "sloppy").message())
        for message in ws:
            kind, _ = wire.split(message)
            if kind == wire.CLOSE:
                return
            ws.send(wire.audio(np.zeros(100, np.float32)))

    with serve(handler, "127.0.0.1", 0) as server, threaded(server) as port:
        model = bridge(f"ws://127.0.0.1:{port}")
        model.start(SessionInfo(instance=None))
        with pytest.raises(ModelError, match=r"bridge: the server answered step 0 \(0.00 s\) "
                                             r"with 100 samples; a stepped bridge answers "
                                             r"exactly frame=1920 \(its READY\)"):
            model.step(np.zeros(1920, np.float32))
        model.finish()


def test_streaming_simulator_injects_the_cue_while_the_model_speaks(tmp_path):
    from pytest_duplexact.pipelines.simulator import SimulatorReplay
    from tests.pipelines.helpers import reference

    instance = make_instance(tmp_path, "stop", "direct_interruption", {
        "lead_in": cat(gap(0.1), tone(0.4), gap(0.1)), "reference": reference(1.0),
        "cue": cat(gap(0.05), tone(0.4, 262.0), gap(0.05))}, {"cue_start": 0.05, "cue_end": 0.45})
    with scripted_server({"model": "at", "mode": "streaming", "speak_at_s": 0.6}) as url:
        rec = streamed(bridge(url), instance, SimulatorReplay(observation_s=0.3))
    # the rule policy injects after 1.5 s of heard model speech: not forced, mid-reply
    assert rec.cue is not None and not rec.cue.forced
    assert 0.6 + 1.5 <= rec.cue.start < 0.6 + 1.5 + 0.6 + load_allowance(rec), (rec.cue,
                                                                                rec.clock)
    assert [w.text for w in rec.transcript][:2] == ["Okay", "thanks"]
