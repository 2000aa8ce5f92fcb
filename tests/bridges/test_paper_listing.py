"""`duplexact models` lists the paper's 14 models with their routes, and only claims a route is
runnable when its adapter (and bridge module) exist in this install."""

from __future__ import annotations

from pytest_duplexact.cli import main
from pytest_duplexact.models import BUILTINS
from pytest_duplexact.models.catalogue import paper_models
from pytest_duplexact.models.catalogue.paper_models import ROSTER, ROUTES, Route
from tests.bridges.support import scripted_server

PAPER = ["moshi", "freeze-omni", "mini-omni2", "vita-1.5", "voila", "flm-audio",
         "raon-speechchat", "bayling-duplex", "lychee-fd", "minicpm-o", "gemini-live",
         "gpt-realtime", "grok-voice", "qwen-omni-realtime"]


def _models(capsys, *args) -> tuple[int, str]:
    rc = main(["models", *args])
    return rc, capsys.readouterr().out


def test_the_roster_is_the_papers_fourteen_and_every_route_is_one_of_them():
    assert [r[0] for r in ROSTER] == PAPER
    assert set(ROUTES) <= set(PAPER)
    for name, routes in ROUTES.items():
        for r in routes:
            assert r.kind in ("in-process", "bridge", "native server", "serving engine",
                              "hosted"), name
            assert r.missing() is None, (name, r)  # this install has what its rows name


def test_every_paper_model_is_listed_with_its_route(capsys):
    rc, out = _models(capsys)
    assert rc == 0
    section = out[out.index("The paper's 14 models"):]
    heads = [line.split()[0] for line in section.splitlines()[1:] if line.startswith("  ") and
             not line.startswith("    ")]
    assert heads == PAPER
    assert "bridge: pytest --duplexact-model=bridge --duplexact-model-option url=ws://HOST:8765  " \
           "[needs its server]" in section
    assert "start: python -m pytest_duplexact.bridges.moshi_bridge" in section
    assert ("serving engine: pytest --duplexact-model=vllm-omni --duplexact-model-option "
            "url=ws://HOST:8099/v1/realtime?duplex=1 --duplexact-model-option "
            "ref_audio=VOICE.wav  [needs its server]") in section
    assert "(Raon-SpeechChat, KRAFTON/Raon-SpeechChat-9B; the paper ran direct + simulator; " \
           "native transcript)" in section
    for name in PAPER:
        if name not in ROUTES:
            block = section[section.index(f"  {name}  ("):].splitlines()
            assert block[1].strip() == "no adapter in this install  [not runnable here]", name


def test_a_route_whose_adapter_is_absent_never_claims_to_run(capsys, monkeypatch):
    monkeypatch.setitem(ROUTES, "flm-audio", (
        Route("bridge", "bridge", "url=ws://HOST:8765", start="python -m x",
              bridge="pytest_duplexact.bridges.flm_audio_not_here"),
        Route("native server", "flm-audio-native", "url=ws://HOST:8990")))
    rc, out = _models(capsys, "flm-audio")
    assert rc == 1
    assert "bridge: no pytest_duplexact.bridges.flm_audio_not_here module in this install  " \
           "[not runnable here]" in out
    assert "native server: no 'flm-audio-native' adapter in this install" in out
    assert "flm-audio-native" not in BUILTINS and paper_models.ROUTES is ROUTES


def test_a_running_bridge_is_reported_reachable(capsys):
    with scripted_server() as url:
        rc, out = _models(capsys, "bridge", "-o", f"url={url}")
    assert rc == 0, out
    assert "server ........................ reachable: scripted-at: stepped, 24000 Hz, " \
           "1920-sample frames, transcript yes" in out
