"""VITA-1.5: the web demo server (``web_demo/server.py`` of whn09/VITA, the 1.5 tree we could
check out: its Flask-SocketIO app, its ``multiprocessing`` Manager queues, both LLM worker
processes and the TTS worker process, its wake-up/VAD iterator and its queues) started with
the command docs/models.md prints, only the networks stubbed (tests/upstream/stubs/vita:
vLLM's ``LLM``, the model package ``vita/`` (input embeddings, the TTS decoder), the
tokenizer and feature extractor that ship with the weights, the silero VAD network as our
own TorchScript energy VAD; decord and PyAudio, imported but unused; torchaudio as for
Freeze-Omni; ``torch.cuda.current_device`` / ``get_device_name`` answering for the CPU),
and our real ``vita-1.5`` adapter driven against it over HTTPS.

Environment ($DUPLEXACT_UPSTREAM_DIR/whn09+VITA.venv, Python 3.11)::

    pip install torch==2.13.0 flask==3.0.3 flask_socketio==5.3.4 "python-socketio>=5,<6" \\
        "numpy<2" pillow librosa scipy onnxruntime opencv-python-headless cryptography \\
        simple-websocket

(``web_demo_requirements.txt`` pins torch 2.4.0, vLLM 0.5.5, transformers 4.44.2 and more,
which only the stubbed networks use.) This tree's server sends no ``response_text`` (the
VITA-MLLM/VITA copy does): the row says text: no.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
from pathlib import Path

import numpy as np
import pytest

from pytest_duplexact.data.audio import SAMPLE_RATE
from pytest_duplexact.models.providers.socketio_omni import vita_15
from tests.fakes.fake_ws import energy_bounds
from tests.support.realtime import event_kinds, run_trial
from tests.upstream import support

REPO = "whn09/VITA"
STUBS = [support.STUBS / "vita", support.STUBS / "common"]
VAD = "web_demo/wakeup_and_vad/resources"


def started(ck: support.Checkout, d: Path, answer_s: float = 1.0) -> support.Launched:
    """The server, its stubs answering ``answer_s`` long, our VAD network where the README has
    you put silero's, an empty model folder; started once its worker processes are ready (it
    listens before they are, and queues turns meanwhile)."""
    launched = support.Launched(
        ck, "vita-1.5", d, STUBS, 8081, writable=(VAD, "web_demo/vita_html/web/resources"),
        replaced={"vita": support.STUBS / "vita" / "vita"},
        env={"DUPLEXACT_STUB_ANSWER_S": str(answer_s)},
        ready=(("LLM done", 2), ("llm2TTS done", 1)))
    (launched.tree / "demo_VITA_ckpt").mkdir()
    subprocess.run([ck.python, str(support.STUBS / "vita" / "make_vad.py"),
                    str(launched.tree / VAD / "silero_vad.jit")], check=True, timeout=120,
                   env={"PYTHONPATH": ":".join(map(str, STUBS))})
    return launched


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    ck = support.checkout(REPO)
    with started(ck, tmp_path_factory.mktemp("vita")) as launched:
        yield launched


def model(port: int, **options: str):
    return vita_15(server_url=f"https://127.0.0.1:{port}", verify="false",
                   transports="websocket", **options)


def clip(start: float | None, total: float, *more: float) -> np.ndarray:
    """Silence with the utterance at ``start`` and each of ``more`` (s)."""
    return support.user_turns(() if start is None else (start, *more), total)


def test_the_adapter_against_the_authors_server(server, tmp_path):
    """Connect, stream, the answer's audio after the stub LLM's answer, two sessions in turn
    (the history reset between them), two sessions at once (they share one output queue), a
    barge-in; the measured row."""
    ck, port, log, srv = server.ck, server.port, server.log, server.srv
    onsets: list[float] = []

    async def turn():
        before = len(support.stub_events(log, "answer"))
        rec, _, t0, session = await run_trial(model(port), clip(0.3, total=6.0))
        answers = support.stub_events(log, "answer")[before:]
        assert len(answers) == 1, srv.tail()
        a = int((answers[0] - t0) * SAMPLE_RATE)
        bounds = energy_bounds(rec.output[a:], SAMPLE_RATE)
        assert bounds is not None, f"no answer audio after the stub's answer:\n{srv.tail()}"
        return bounds[0], session

    for _ in range(2):  # a fresh session each, as the adapter runs instances one at a time
        onset, session = asyncio.run(turn())
        onsets.append(onset)
    assert session.usage["audio_out_s"] > 0.5
    shared = asyncio.run(together(port))
    with started(ck, tmp_path, answer_s=4.0) as long_answers:
        barge = asyncio.run(barge_in(long_answers))
    support.record_row(
        "vita-1.5", ck, connects=True, audio=True, text=False, barge_in_stop=barge,
        onset_err_ms_median=round(1000 * statistics.median(onsets)),
        onset_err_ms_max=round(1000 * max(onsets)), sessions=1,
        notes=("two sessions at once: the silent one heard "
               f"{shared:.2f} s of the other's answer (one shared output queue: whichever "
               "session pulls first gets it, so this moves run to run); this tree sends no "
               "response_text"))


async def together(port: int) -> float:
    """One session speaks, another stays silent, at once: seconds of audio the silent one
    received (the server's one TTS output queue goes to whichever user pulls first)."""
    await asyncio.sleep(4.0)  # handle_disconnect sleeps 3 s before it frees a user's slot
    (_, _, _, speaker), (_, _, _, silent) = await asyncio.gather(
        run_trial(model(port), clip(0.3, total=6.0)), run_trial(model(port), clip(None, 6.0)))
    assert speaker.usage["audio_out_s"] + silent.usage["audio_out_s"] > 0.5
    return silent.usage["audio_out_s"]


async def barge_in(launched: support.Launched) -> bool:
    """A 4 s answer talked over: the second utterance goes to the other LLM process, whose
    output starts with stop_tts in place of a segment (and empties the shared queue). True
    when playback stopped there: one barge-in logged, the first answer truncated."""
    before = len(launched.decisions("answer"))
    rec, _, t0, _ = await run_trial(model(launched.port), clip(0.3, 10.0, 3.4))
    answers = launched.decisions("answer")[before:]
    kinds = event_kinds(rec)
    return len(answers) == 2 and kinds.count("speech_started") == 1 and "truncate" in kinds
