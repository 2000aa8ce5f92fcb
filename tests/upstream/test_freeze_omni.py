"""Freeze-Omni: the authors' own server (VITA-MLLM/Freeze-Omni ``bin/server.py``, with its
``web/`` VAD, queues, pools and certificate code) started with the command docs/models.md
prints, only the networks stubbed (tests/upstream/stubs/freeze_omni: the speech LLM and its
state head, the speech decoder; torchaudio's ``fbank``, which has no build for this torch;
``Tensor.cuda`` a no-op), and our real ``freeze-omni`` adapter driven against it over HTTPS.

Environment ($DUPLEXACT_UPSTREAM_DIR/VITA-MLLM+Freeze-Omni.venv, Python 3.11)::

    pip install torch==2.13.0 flask==3.0.3 flask_socketio==5.3.4 "python-socketio>=5,<6" \\
        silero-vad==5.1.2 "numpy<2" soundfile PyYAML cryptography simple-websocket
    pip uninstall -y torchaudio   # silero-vad pulls one built for another torch

(the README pins torch 2.2.0 and transformers 4.45.2, which only the stubbed networks use;
silero-vad's own network runs for real.) The server is started from a folder of links to the
checkout (support.run_tree) so the certificate it writes at first start does not land in the
shared checkout.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
from pathlib import Path

import numpy as np
import pytest

from pytest_duplexact.data.audio import SAMPLE_RATE
from pytest_duplexact.models.providers.socketio_omni import freeze_omni
from pytest_duplexact.models.streaming_contract import TransientModelError
from pytest_duplexact.pipelines.streaming_duplex import StreamingDuplex
from tests.fakes.fake_ws import energy_bounds
from tests.support.realtime import event_kinds, run_trial
from tests.upstream import support

REPO = "VITA-MLLM/Freeze-Omni"
MAX_USERS = 3  # the printed command's --max_users
FREED_S = 4.0  # handle_disconnect sleeps 3 s before it frees the user's slot
STUBS = [support.STUBS / "freeze_omni", support.STUBS / "common"]


def clip(*starts: float, total: float) -> np.ndarray:
    return support.user_turns(starts, total)


def speech_end(start: float) -> float:
    return start + support.SPEECH_S


def started(ck: support.Checkout, d: Path, answer_s: float = 1.0) -> support.Launched:
    """The server, its stubs answering ``answer_s`` long (its certificate written in the run
    folder), the stub model folder holding the server.json it reads."""
    launched = support.Launched(ck, "freeze-omni", d, STUBS, 8081, writable=("web/resources",),
                                env={"DUPLEXACT_STUB_ANSWER_S": str(answer_s)})
    (launched.tree / "checkpoints").symlink_to(support.STUBS / "freeze_omni" / "checkpoints")
    return launched


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    ck = support.checkout(REPO)
    with started(ck, tmp_path_factory.mktemp("freeze-omni")) as launched:
        yield launched


def model(port: int, **options: str):
    return freeze_omni(server_url=f"https://127.0.0.1:{port}", verify="false",
                       transports="websocket", **options)


def onset_after(rec, t0: float, since: float) -> float | None:
    """Monotonic time the heard output first sounds after ``since`` (monotonic)."""
    a = max(0, int((since - t0) * SAMPLE_RATE))
    bounds = energy_bounds(rec.output[a:], SAMPLE_RATE)
    return None if bounds is None else since + bounds[0]


def test_the_readme_command_alone_does_not_start_outside_a_terminal(server):
    """Issue 30 item 5: Flask-SocketIO 5.3.4 refuses Werkzeug without a terminal, which is why
    the printed command wraps the README's in `script`."""
    bare = server.command.split('"')[1].replace(f"--port {server.port}",
                                                  f"--port {support.free_port()}")
    with support.Server(server.ck, bare, server.tree, STUBS,
                        server.tree.parent / "bare.log") as srv:
        try:
            srv.proc.wait(support.START_S)
        except subprocess.TimeoutExpired:
            pytest.fail("the README's command started without a terminal: drop the `script` "
                        "wrapper from docs/models.md")
    assert "allow_unsafe_werkzeug" in srv.tail()


def test_the_adapter_against_the_authors_server(server, tmp_path):
    """Connect (and the http:// hint), stream, the answer's audio at the stub's decision, the
    stop_tts before every answer, a barge-in, the VAD deaf for 2 s after a turn, sessions at
    once up to --max_users, end of session; the measured row."""
    ck, port, log, srv = server.ck, server.port, server.log, server.srv
    onsets: list[float] = []

    async def plain_answers():
        # two turns: the second starts 2.3 s after the first ended (the VAD hears it again)
        starts = (0.3, speech_end(0.3) + 2.3)
        # with a system prompt: prompt_text -> the server's set_prompt -> prompt_success
        rec, _, t0, session = await run_trial(model(port, prompt_text="Be brief."),
                                              clip(*starts, total=7.8))
        return rec, t0, session, starts

    async def deaf_window():
        # a second utterance 1.0 s after the first: inside the 2 s the VAD stays triggered
        starts = (0.3, speech_end(0.3) + 1.0)
        rec, _, t0, _ = await run_trial(model(port), clip(*starts, total=6.0))
        return rec, t0, starts

    async def wrong_scheme():
        with pytest.raises(TransientModelError, match="serves HTTPS only"):
            await StreamingDuplex.open(freeze_omni(server_url=f"http://127.0.0.1:{port}",
                                                   connect_timeout="10"), None)

    asyncio.run(wrong_scheme())
    before = len(support.stub_events(log, "ss"))
    rec, t0, session, starts = asyncio.run(plain_answers())
    decisions = support.stub_events(log, "ss")[before:]
    assert len(decisions) == 2, srv.tail()
    for start, decided in zip(starts, decisions):
        assert decided > t0 + speech_end(start)
        heard = onset_after(rec, t0, decided - 0.05)
        assert heard is not None, "no answer audio after the stub's decision"
        onsets.append(heard - decided)
    # stop_tts came before each answer (and at recording-started): no barge-in was logged
    assert session.usage["stop_tts"] >= 3 and "speech_started" not in event_kinds(rec)
    assert session.usage["audio_out_s"] == pytest.approx(2.0, abs=0.05)  # both answers whole
    reply_after_user = [d - (t0 + speech_end(s)) + o for s, d, o in zip(starts, decisions,
                                                                         onsets)]

    before = len(support.stub_events(log, "ss"))
    rec2, t02, starts2 = asyncio.run(deaf_window())
    assert len(support.stub_events(log, "ss")[before:]) == 1  # the second was not heard

    sessions = asyncio.run(at_once(port))
    with started(ck, tmp_path, answer_s=4.0) as long_answers:
        barge = asyncio.run(barge_in(long_answers.port, long_answers.log))
    assert "disconnected" in srv.tail(20000)  # end of session: the server freed the user

    support.record_row(
        "freeze-omni", ck, connects=True, audio=True, text=False, barge_in_stop=barge,
        onset_err_ms_median=round(1000 * statistics.median(onsets)),
        onset_err_ms_max=round(1000 * max(onsets)), sessions=sessions,
        notes=f"reply {min(reply_after_user):.2f}-{max(reply_after_user):.2f} s after the "
              "user ended (stub: 0.5 s); no text (the server sends none); deaf 2 s after a turn")


async def barge_in(port: int, log: Path) -> bool:
    """An answer long enough to talk over (the stub's 4 s): the user speaks again 2.3 s after
    the first utterance, the state head's 'ss' at its end interrupts the answer (stop_tts) and
    a new one starts. True when playback stopped at that stop_tts."""
    starts = (0.3, speech_end(0.3) + 2.3)
    before = len(support.stub_events(log, "ss"))
    rec, _, t0, _ = await run_trial(model(port), clip(*starts, total=10.0))
    decided = support.stub_events(log, "ss")[before:]
    kinds = event_kinds(rec)
    return len(decided) == 2 and kinds.count("speech_started") == 1 and "truncate" in kinds


async def at_once(port: int) -> int:
    """--max_users sessions at once, each answered; one more is refused (too_many_users)."""
    async def one():
        rec, _, t0, _ = await run_trial(model(port), clip(0.3, total=3.5))
        return energy_bounds(rec.output, SAMPLE_RATE) is not None

    await asyncio.sleep(FREED_S)
    answered = await asyncio.gather(*[one() for _ in range(MAX_USERS)])
    assert all(answered)
    await asyncio.sleep(FREED_S)
    sessions = [await StreamingDuplex.open(model(port), None) for _ in range(MAX_USERS)]
    try:
        with pytest.raises(TransientModelError, match="too_many_users"):
            await StreamingDuplex.open(model(port), None)
    finally:
        for d in sessions:
            await d.close()
    return sum(answered)
