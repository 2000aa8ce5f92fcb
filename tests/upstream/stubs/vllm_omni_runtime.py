"""vLLM-Omni's own duplex WebSocket handler (``OmniDuplexSessionHandler``, from the checkout on
``PYTHONPATH``) served on 127.0.0.1, with what cannot run here replaced by ours: the engine-side
session runtime and the model become ``StubOmni`` / ``StubSession``, a deterministic duplex
stub (listen while the user speaks; 0.5 s after the user stops, speak 1 s of a 440 Hz tone
at 1x in 100 ms deltas with a fixed transcript; with ``overlap_policy=barge_in_on_speech``,
user speech over the response cancels it). Their handler does the transport: the Realtime
handshake, translating wire events into their typed commands, pumping their typed events to
the wire with ``server_event_seq``, journaling, admission errors.

Three stubs let their handler import without vLLM: ``vllm.logger`` (a logging shim),
``vllm_omni.engine.messages.EngineQueueMessage`` (the msgspec base of engine messages, which
otherwise imports vLLM's engine) and the ``DuplexOmni`` / ``DuplexSessionHandle`` names
(imported by the handler for typing; the real class is an ``AsyncOmni`` that starts vLLM
engines). Their packages' ``__init__`` files, which import vLLM and torch, are not run.

Run by tests/upstream/test_vllm_omni.py in their interpreter::

    PYTHONPATH=<checkout> python vllm_omni_runtime.py --log FILE [--max-sessions N]
    # prints "PORT <n>", serves until stdin closes, then writes the ground truth
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import logging
import os
import sys
import threading
import time
import types
import uuid

import numpy as np


def _bare(name: str, root: str) -> None:
    pkg = types.ModuleType(name)
    pkg.__path__ = [os.path.join(root, *name.split("."))]
    sys.modules[name] = pkg


def _install_stubs(root: str) -> None:
    for name in ("vllm_omni", "vllm_omni.engine", "vllm_omni.entrypoints", "vllm_omni.config",
                 "vllm_omni.protocol", "vllm_omni.metrics"):
        _bare(name, root)
    vllm = types.ModuleType("vllm")
    logger = types.ModuleType("vllm.logger")
    logger.init_logger = logging.getLogger
    vllm.logger = logger
    sys.modules.update({"vllm": vllm, "vllm.logger": logger})
    import msgspec

    messages = types.ModuleType("vllm_omni.engine.messages")

    class EngineQueueMessage(msgspec.Struct, forbid_unknown_fields=True):
        pass

    messages.EngineQueueMessage = EngineQueueMessage
    sys.modules["vllm_omni.engine.messages"] = messages
    omni = types.ModuleType("vllm_omni.entrypoints.duplex_omni")
    omni.DuplexOmni = type("DuplexOmni", (), {})
    omni.DuplexSessionHandle = type("DuplexSessionHandle", (), {})
    sys.modules["vllm_omni.entrypoints.duplex_omni"] = omni


IN_RATE, OUT_RATE = 16_000, 24_000
UNIT_MS = 100
ANSWER_AFTER_MS = 500
SPEAK_S = 1.0
TRANSCRIPT = "This is the stub speaking for one second."
VAD_RMS = 0.02


class StubSession:
    """One session: their handle's surface (submit, events, close) over our stub model."""

    def __init__(self, omni: "StubOmni", config: dict):
        from vllm_omni.engine.duplex.config import DuplexCapabilities

        self.omni = omni
        self.session_id = f"duplex-{uuid.uuid4().hex}"
        self.capabilities = DuplexCapabilities(
            supports_model_native_turn_policy=True, supports_input_append=True,
            supports_barge_in=True, supports_playback_ack=True, supports_audio_truncate=True,
            supports_multi_session=omni.max_sessions > 1, supports_session_resume=False,
            chunk_period_ms=UNIT_MS)
        self.policy = str(config.get("overlap_policy") or "listen_only")
        self.public_session = {
            "object": "realtime.session", "id": self.session_id, "model": config.get("model"),
            "input_audio_format": "pcm16", "output_audio_format": "pcm16",
            "audio": {"input": {"sample_rate_hz": IN_RATE},
                      "output": {"sample_rate_hz": OUT_RATE}},
            "overlap_policy": self.policy, "idle_timeout_s": 300.0,
            "capabilities": self.capabilities.as_dict()}
        self.lease_generation = 0
        self.closed = False
        self.queue: asyncio.Queue = asyncio.Queue()
        self.input_ms = 0.0
        self.pending = np.zeros(0, np.float32)
        self.heard = False
        self.voiced_end_ms = 0.0
        self.response: dict | None = None
        self.truth = {"session_id": self.session_id, "policy": self.policy, "t0": None,
                      "responses": [], "acks": [], "closed": None}
        omni.truth.append(self.truth)

    def deliver(self, event) -> None:
        self.queue.put_nowait(event)

    async def events(self):
        while True:
            event = await self.queue.get()
            yield event
            if event.is_terminal:
                return

    async def submit(self, command) -> None:
        from vllm_omni.engine.duplex import commands

        if isinstance(command, commands.AppendAudio):
            self.on_audio(command.audio)
        elif isinstance(command, commands.AckPlayback):
            from vllm_omni.engine.duplex.events import PlaybackAcknowledged

            self.truth["acks"].append({"t": time.monotonic(), "played_ms": command.played_ms,
                                       "response_id": command.response_id})
            self.deliver(PlaybackAcknowledged(session_id=self.session_id, details={
                "type": "playback.acknowledged", "played_ms": command.played_ms,
                "committed_ms": command.committed_ms}))
        elif isinstance(command, commands.CloseSession):
            await self.close(reason="client_close")

    async def close(self, *, reason: str = "client_close", timeout: float | None = None) -> None:
        from vllm_omni.engine.duplex.events import SessionClosed

        if self.closed:
            return
        self.closed = True
        self.truth["closed"] = reason
        if self.response is not None:
            self.response["task"].cancel()
        self.omni.sessions.pop(self.session_id, None)
        self.deliver(SessionClosed(session_id=self.session_id, reason=reason))

    # -- the stub model --

    def on_audio(self, raw: bytes) -> None:
        if self.truth["t0"] is None:
            self.truth["t0"] = time.monotonic()
        x = np.frombuffer(raw, "<i2").astype(np.float32) / 32768
        before = self.input_ms
        self.input_ms += 1000 * len(x) / IN_RATE
        self.pending = np.concatenate([self.pending, x])
        frame, start = IN_RATE // 50, self.input_ms - 1000 * len(self.pending) / IN_RATE
        while len(self.pending) >= frame:
            f, self.pending = self.pending[:frame], self.pending[frame:]
            start += 20
            if float(np.sqrt(np.mean(f.astype(np.float64) ** 2))) >= VAD_RMS:
                self.heard, self.voiced_end_ms = True, start
                if self.response is not None and self.policy == "barge_in_on_speech":
                    self.barge_in()
        for _ in range(int(before // UNIT_MS), int(self.input_ms // UNIT_MS)):
            self.unit()

    def unit(self) -> None:
        from vllm_omni.engine.duplex.events import Listen

        if self.response is not None:
            return
        if self.heard and self.input_ms - self.voiced_end_ms >= ANSWER_AFTER_MS:
            self.heard = False
            self.speak()
        else:
            self.deliver(Listen(session_id=self.session_id, details={"reason": "model_listen"}))

    def speak(self) -> None:
        from vllm_omni.engine.duplex.events import ResponseCreated, Speak

        rid = f"resp_{uuid.uuid4().hex[:8]}"
        record = {"response_id": rid, "first_audio_at": None, "cut_at": None, "ended": None}
        self.truth["responses"].append(record)
        self.deliver(ResponseCreated(session_id=self.session_id, response_id=rid,
                                     response={"id": rid, "status": "in_progress"}))
        self.deliver(Speak(session_id=self.session_id, response_id=rid, item_id=f"item_{rid}"))
        self.response = {"id": rid, "record": record,
                         "task": asyncio.get_running_loop().create_task(self.stream(rid, record))}

    async def stream(self, rid: str, record: dict) -> None:
        from vllm_omni.engine.duplex.events import (
            AudioDelta,
            AudioDone,
            ResponseDone,
            TranscriptDelta,
        )

        n = OUT_RATE * UNIT_MS // 1000
        units = int(SPEAK_S * 1000 // UNIT_MS)
        words = TRANSCRIPT.split()
        t = np.arange(n * units) / OUT_RATE
        tone = np.round(0.3 * np.sin(2 * np.pi * 440 * t) * 32767).astype("<i2")
        start = time.monotonic()
        for k in range(units):
            piece = base64.b64encode(tone[k * n:(k + 1) * n].tobytes()).decode("ascii")
            if record["first_audio_at"] is None:
                record["first_audio_at"] = time.monotonic()
            self.deliver(AudioDelta(session_id=self.session_id, response_id=rid,
                                    item_id=f"item_{rid}", delta=piece, format="pcm16",
                                    sample_rate_hz=OUT_RATE))
            text = " ".join(words[k * len(words) // units:(k + 1) * len(words) // units])
            self.deliver(TranscriptDelta(session_id=self.session_id, response_id=rid,
                                         item_id=f"item_{rid}",
                                         delta=(" " if k else "") + text))
            await asyncio.sleep(max(0.0, start + (k + 1) * UNIT_MS / 1000 - time.monotonic()))
        self.deliver(AudioDone(session_id=self.session_id, response_id=rid,
                               item_id=f"item_{rid}"))
        self.deliver(ResponseDone(session_id=self.session_id, response_id=rid,
                                  response={"id": rid, "status": "completed"}))
        record["ended"] = "completed"
        self.response = None

    def barge_in(self) -> None:
        from vllm_omni.engine.duplex.events import OverlapDecision, ResponseDone

        response, self.response = self.response, None
        response["task"].cancel()
        rid = response["id"]
        self.deliver(OverlapDecision(session_id=self.session_id, policy=self.policy,
                                     action="barge_in", reason="server_vad_utterance_active"))
        response["record"].update(cut_at=time.monotonic(), ended="barge_in")
        self.deliver(ResponseDone(session_id=self.session_id, response_id=rid, response={
            "id": rid, "status": "cancelled",
            "status_details": {"type": "cancelled", "reason": "barge_in"}}))


class StubOmni:
    """What their handler asks of ``DuplexOmni``: open / get / resume / detach sessions, with
    admission at ``max_sessions`` as their session manager words it."""

    def __init__(self, max_sessions: int):
        self.max_sessions = max_sessions
        self.sessions: dict[str, StubSession] = {}
        self.truth: list[dict] = []
        self.refused = 0
        self.duplex_session_config = types.SimpleNamespace(
            resume_replay_ttl_s=60.0, resume_replay_max_bytes_per_session=1 << 22)

    async def open_session(self, config) -> StubSession:
        from vllm_omni.engine.duplex.events import SessionCreated
        from vllm_omni.engine.duplex.messages import DuplexSessionError

        if len(self.sessions) >= self.max_sessions:
            self.refused += 1
            raise DuplexSessionError(
                f"duplex_session_capacity_exhausted: limit={self.max_sessions}",
                code="resource_exhausted", retryable=True)
        session = StubSession(self, dict(config))
        self.sessions[session.session_id] = session
        session.deliver(SessionCreated(session_id=session.session_id,
                                       session=session.public_session))
        return session

    def get_session(self, session_id: str):
        return self.sessions.get(session_id)

    async def resume_session(self, session_id: str, **_):
        raise KeyError(session_id)

    async def detach_session(self, session_id: str, **_) -> None:
        session = self.sessions.get(session_id)
        if session is not None:
            await session.close(reason="disconnect")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--max-sessions", type=int, default=4)
    args = ap.parse_args()
    root = next(p for p in sys.path if os.path.isdir(os.path.join(p, "vllm_omni")))
    _install_stubs(root)
    import uvicorn
    from fastapi import FastAPI
    from vllm_omni.entrypoints.duplex.serving import OmniDuplexSessionHandler

    omni = StubOmni(args.max_sessions)
    handler = OmniDuplexSessionHandler(duplex_omni=omni)
    app = FastAPI()
    # a plain Starlette route: the endpoint gets the socket as it is (no FastAPI signature
    # resolution), as their server mounts the handler
    app.router.add_websocket_route("/v1/realtime", handler.handle_realtime_session)

    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", ws="websockets")
    server = uvicorn.Server(config)

    def stop_when_stdin_closes() -> None:
        sys.stdin.read()
        server.should_exit = True

    async def serve() -> None:
        task = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        print(f"PORT {port}", flush=True)
        threading.Thread(target=stop_when_stdin_closes, daemon=True).start()
        await task

    asyncio.run(serve())
    with open(args.log, "w") as fh:
        json.dump({"sessions": omni.truth, "refused": omni.refused}, fh)


if __name__ == "__main__":
    main()
