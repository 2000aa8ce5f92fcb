"""`pytest --duplexact-model=gemini-live` end to end, against the fake Gemini Live server
(tests/fakes/gemini_server.py, its own process, TLS with a test CA trusted through
SSL_CERT_FILE), over bundled Direct Replay, Simulator Replay (the user barges in on the model)
and Barge-in Replay instances.

Real time: each trial streams its audio at 1x, the three at once (--duplexact-concurrency=3:
the finished trials are scored in the scoring worker's process, run/offload.py, so their VAD
does not stall the live sessions' loop). The fake's ground truth (when it sent each turn's
first audio, when it sent ``interrupted``) is checked against what was recorded, allowing the
lateness each trial measured. tests/models/providers/test_gemini_live.py times ten concurrent
sessions in one loop."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from pytest_duplexact.data.recording_io import track_file
from pytest_duplexact.data.results import worst_lag_ms
from tests.support.servers import child, load_fake_server

# the [gemini] extra and the test CA maker (both in the dev extra)
pytest.importorskip("google.genai")
pytest.importorskip("trustme")

KEY = "AIza-test-DUPLEXACT-never-written-0123456789"
CHUNK = 0.020
TOLERANCE = 0.040
LOAD_WINDOW = 0.25  # s around an onset whose input lateness measures the host's load then

# Real speech (the endpoint model's bundled reply), so the VAD hears it. Paced at 1.05x real
# time, a reply is still being generated when the simulator's cue comes 1.5 s into it, so
# the cue is a barge-in the service answers with ``interrupted``.
SPEECH = Path(__file__).parents[2] / "pytest_duplexact" / "models" / "assets" / "response.flac"
SCRIPT = {"speech_file": str(SPEECH), "speak_s": 3.6, "answer_after_ms": 300, "pace": 1.05,
          "text": "Okay, thanks for telling me. Let me help you with that."}


def _clock_of(session: dict) -> tuple[float, list[tuple[float, float]]]:
    """The fake's clock on the harness's, and how late each input message reached the fake.

    The harness's t = 0 is when it sent its first input audio, the fake's when that audio
    arrived: they differ by that message's transit, which on a loaded host is tens of ms. Each
    message k of input position p_k arrived at r_k = p_k + (its send lag + transit) - transit_0
    on the fake's clock; the least late one (lag and transit near 0 on loopback) gives the
    offset, ``-min(r_k - p_k)``. Returns (offset, [(harness time, lateness) per message])."""
    pos, rows = 0.0, []
    for t, ms in session["received_audio"]:
        rows.append((t, t - pos))
        pos += ms / 1000
    offset = -min(d for _, d in rows)
    return offset, [(t + offset, d + offset) for t, d in rows]


def _fake():
    return load_fake_server("gemini_server")


class FakeProcess:
    """The fake in its own process; ``stop()`` ends it and returns its ground truth."""

    def __init__(self, tmp_path: Path):
        self.ca, self.log = tmp_path / "ca.pem", tmp_path / "truth.json"
        self.child = child("gemini_server.py", "--script", json.dumps(SCRIPT),
                           "--ca-out", self.ca, "--log", self.log)
        self.base_url = f"https://127.0.0.1:{self.child.port}"

    def stop(self) -> list[dict]:
        self.child.stop()
        return json.loads(self.log.read_text()) if self.log.exists() else []


@pytest.fixture
def gemini_server(tmp_path):
    server = FakeProcess(tmp_path)
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.slow
def test_gemini_live_bundled_run(pytester, gemini_server, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv("SSL_CERT_FILE", str(gemini_server.ca))
    res = pytester.runpytest_subprocess(
        "--duplexact-model=gemini-live",
        f"--duplexact-model-option=base_url={gemini_server.base_url}",
        "--duplexact-model-option=silence_duration_ms=500",
        "--duplexact-condition=stop.direct_interruption,take_turn.immediate,interrupt.help",
        "--duplexact-limit=1", "--duplexact-concurrency=3", "--duplexact-run-dir=run",
        "--junitxml=junit.xml",
        "--duplexact-timing-tolerance=off",  # the guard: test_timing_guard_run.py, load-free
        "-p", "no:cacheprovider", timeout=400)
    run = Path(pytester.path, "run")
    rep = json.loads((run / "report.json").read_text())
    n = rep["totals"]["instances"]
    assert n == 3 and rep["totals"]["errors"] == 0, res.stdout.str()
    pipelines = {i["action"] for i in rep["instances"]}
    assert pipelines == {"stop", "take_turn", "interrupt"}

    # the key is on no file the run wrote, nor in the junit xml or the terminal
    assert Path(pytester.path, "junit.xml").is_file()
    for path in [*run.rglob("*"), Path(pytester.path, "junit.xml")]:
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    assert KEY not in res.stdout.str() + res.stderr.str()

    sessions = gemini_server.stop()  # the fake's ground truth
    assert len(sessions) == n  # one session per instance: nothing was retried

    # each session belongs to the recording with exactly its input length
    recs = {}
    for inst in rep["instances"]:
        folder = run / inst["recording"]
        x, sr = sf.read(track_file(folder, "input"), dtype="float32")
        y, _ = sf.read(track_file(folder, "output"), dtype="float32")
        meta = json.loads((folder / "recording.json").read_text())
        # the trial's own measured lateness (input, output stamped late, the loop's stall)
        stall = worst_lag_ms(json.loads((folder / "outcome.json").read_text()).get("clock")
                             or {}) / 1000
        recs[inst["id"]] = (len(x) / sr * 1000, y, sr, meta, stall)
    fake = _fake()
    onset_in_clip = fake.energy_bounds(fake.speech(str(SPEECH), SCRIPT["speak_s"]),
                                       fake.OUT_RATE)[0]
    onset_errors, cuts = [], []
    for s in sessions:
        [iid] = [i for i, r in recs.items() if abs(r[0] - s["input_ms"]) < 1.0]
        _, y, sr, meta, stall = recs[iid]
        offset, lateness = _clock_of(s)
        turns = [t for t in s["turns"] if t["audio_start"] is not None]
        starts = [t["audio_start"] for t in turns] + [len(y) / sr]
        for k, t in enumerate(turns):
            # recorded onset: the first loud 5 ms frame of this turn's stretch of output
            a, b = int((t["audio_start"] - 0.1) * sr), int(starts[k + 1] * sr)
            bounds = fake.energy_bounds(y[max(0, a): b], sr)
            assert bounds is not None, (iid, t)
            # truth: when the speech onset in the reply plays, given when each chunk was sent
            truth = fake.heard_at(t["sends"], onset_in_clip) + offset
            error = max(0, a) / sr + bounds[0] - truth
            onset_errors.append(error)
            # A stall of either process (or of the kernel between them) around the onset also
            # delays the audio's arrival, by about as much as it delayed the input reaching
            # the fake then; a stall of the harness's loop while the audio arrives delays its
            # reading (the trial's clock measures it): the bound allows the larger measured
            # lateness (twice, as tests/support/realtime.load_allowance does for the
            # catch-up), zero on an idle host.
            late = max([d for at, d in lateness if abs(at - truth) <= LOAD_WINDOW] + [stall])
            assert abs(error) <= TOLERANCE + 2 * late, (iid, k, error, late)
            if t["interrupted_at"] is not None:
                # the cut: nothing audible after the interruption plus one input chunk, up to
                # the next turn; and the turn was still sending when it was cut
                # its arrival: never before it was sent, late by the host's measured load at
                # most (a fixed window would miss it on a loaded machine)
                late_cut = max((d for at, d in lateness
                                if abs(at - t["interrupted_at"] - offset) <= LOAD_WINDOW),
                               default=0.0)
                heard = [e[0] for e in meta["events"] if e[1] == "speech_started"
                         and -0.1 < e[0] - t["interrupted_at"] < 0.1 + 2 * late_cut]
                assert heard, (iid, meta["events"], late_cut)
                cut = heard[0]
                tail = y[int((cut + CHUNK) * sr): int(starts[k + 1] * sr)]
                assert not np.any(np.abs(tail) > 1e-4), (iid, cut)
                assert np.any(np.abs(y[int((cut - 0.5) * sr): int(cut * sr)]) > 1e-3)
                assert t["audio_s"] < SCRIPT["speak_s"]
                cuts.append((iid, cut - t["interrupted_at"]))
    lags = [e[1] for r in recs.values() for e in r[3]["events"] if e[1].startswith("input_lag")]
    errors = np.abs(onset_errors)
    print(f"gemini-live e2e (stalls: {lags or 'none'}; first input's transit "
          f"{[round(_clock_of(s)[0] * 1000, 1) for s in sessions]} ms): {len(errors)} turns, onset |error| vs the fake's send time "
          f"median {np.median(errors) * 1000:.1f} ms, max {errors.max() * 1000:.1f} ms; "
          f"{len(cuts)} barge-in cuts, event arrival - server send "
          f"{[round(c * 1000, 1) for _, c in cuts]} ms")
    # every simulator (stop) instance had its reply interrupted by the cue
    stops = {i["id"] for i in rep["instances"] if i["action"] == "stop"}
    assert stops and stops <= {iid for iid, _ in cuts}

    # what the model cost, as the fake reported it, totalled next to the other services
    used = rep["usage"]["model"]
    assert used["model"] == "gemini-3.1-flash-live-preview" and used["sessions"] == n
    for ours, theirs in (("prompt_tokens", "promptTokenCount"),
                         ("response_tokens", "responseTokenCount")):
        assert used[ours] == sum(s["usage"].get(theirs, 0) for s in sessions) > 0
    assert used["input_audio_s"] == pytest.approx(sum(s["input_ms"] for s in sessions) / 1000)
    # each instance's journal entry keeps its own share, so a resumed run totals the same
    shares = [json.loads((run / i["recording"] / "outcome.json").read_text())["usage"]["model"]
              for i in rep["instances"]]
    assert sorted(x["sessions"] for x in shares) == [1] * n
    assert sum(x["prompt_tokens"] for x in shares) == used["prompt_tokens"]
    res.stdout.fnmatch_lines(["*model: gemini-3.1-flash-live-preview (sessions *"])


def test_missing_key_fails_before_any_instance(pytester, monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    res = pytester.runpytest_subprocess("--duplexact-model=gemini-live",
                                        "--duplexact-run-dir=run", "-p", "no:cacheprovider")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(["*--duplexact-model=gemini-live: gemini-live: no Gemini API key."
                              " Set the GEMINI_API_KEY (or GOOGLE_API_KEY)*"])
    assert not Path(pytester.path, "run", "instances").exists()


def test_plain_http_proxy_is_refused_before_any_instance(pytester, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    res = pytester.runpytest_subprocess(
        "--duplexact-model=gemini-live",
        "--duplexact-model-option=base_url=http://proxy.example.com:8080",
        "--duplexact-run-dir=run", "-p", "no:cacheprovider")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "is plain http:// to proxy.example.com" in res.stderr.str()
    assert KEY not in res.stderr.str() + res.stdout.str()
