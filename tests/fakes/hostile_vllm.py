"""A hostile vLLM-Omni duplex server on 127.0.0.1: it opens the session as the real one does
(``session.update`` -> ``session.created``), then, after a few appends of the client's audio,
sends a ``plan``: any list of text or binary messages (escaped or split keys, floods, huge or
nested events, events outside the protocol), and answers ``session.close`` with
``session.closed``. What the fuzz tests of the vllm-omni adapter put in front of the real
adapter code (tests/models/test_fuzz_vllm_omni.py).

``echo_plan(key, authorization)`` is the plan of a server that echoes the client's key and
its ``Authorization`` header in every field the adapter reads, written with JSON escapes,
half escaped, and split across transcript deltas, then ends the session (``session.expired``)
with the key as the reason: what the end-to-end test runs against, in a process of its own::

    VLLM_OMNI_API_KEY=... python tests/fakes/hostile_vllm.py
    # prints "PORT <n>", serves until stdin closes
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sys
from pathlib import Path
from typing import Sequence

from websockets.asyncio.server import ServerConnection

if str(Path(__file__).resolve().parent) not in sys.path:  # hostile_ws.py is beside this file
    sys.path.append(str(Path(__file__).resolve().parent))
from hostile_ws import HostileWS

CAPS = {"implementation_level": "model_native_duplex", "supports_input_append": True,
        "supports_barge_in": True, "supports_playback_ack": True, "chunk_period_ms": 1000}
Message = str | bytes


def escaped(text: str) -> str:
    """``text`` as a hostile server writes it inside a JSON string: every character escaped."""
    return "".join(f"\\u{ord(c):04x}" for c in text)


def half_escaped(text: str) -> str:
    """The first half as is, the rest escaped: no scrub of the raw text sees it whole."""
    cut = len(text) // 2
    return text[:cut] + escaped(text[cut:])


def created(caps: dict | None = None, audio: dict | None = None, model: str = "hostile") -> str:
    session: dict = {"id": "sess_1", "model": model,
                     "capabilities": CAPS if caps is None else caps}
    if audio is not None:
        session["audio"] = audio
    return json.dumps({"type": "session.created", "session": session, "resume_token": "t"})


def raw_event(kind: str, body: str) -> str:
    """An event whose JSON is written by hand (so escapes stay escapes): ``body`` is the part
    after the type, e.g. ``'"reason": "\\u0073k..."'``."""
    return '{"type": "%s", %s}' % (kind, body)


def pcm_b64(ms: int, rate: int = 24_000, level: float = 0.2) -> str:
    n = rate * ms // 1000
    samples = bytearray()
    for i in range(n):
        v = int(level * 32767 * (1 if (i // 20) % 2 else -1))
        samples += v.to_bytes(2, "little", signed=True)
    return base64.b64encode(bytes(samples)).decode()


def echo_plan(key: str, authorization: str, end: str = "expired") -> list[Message]:
    """Every field the adapter reads, carrying the key or the Authorization header it sent:
    escaped, half escaped, split across two transcript deltas; then the session ends with the
    key in its reason: ``expired`` (lost: the instance is retried) or ``error`` (a final
    error: the instance is an error whose text is written)."""
    forms = [escaped(key), half_escaped(key), escaped(authorization),
             half_escaped(authorization)]
    plan: list[Message] = [raw_event("response.speak", '"response_id": "r1"')]
    plan.append(raw_event("response.output_audio.delta",
                          f'"response_id": "r1", "item_id": "i1", "delta": "{pcm_b64(400)}"'))
    half = len(key) // 2
    plan += [raw_event("response.output_audio_transcript.delta",
                       f'"response_id": "r1", "delta": "my key is {escaped(key[:half])}"'),
             raw_event("response.output_audio_transcript.delta",
                       f'"response_id": "r1", "delta": "{escaped(key[half:])} ok"')]
    for form in forms:
        plan += [raw_event("overlap.decision",
                           f'"action": "listen", "reason": "{form}", "policy": "{form}"'),
                 raw_event("error", f'"error": {{"code": "x", "event_id": "ack_1", '
                                    f'"message": "{form}"}}'),
                 raw_event("response.done", f'"response_id": "r1", "response": {{"id": "r1", '
                                            f'"status": "cancelled", "status_details": '
                                            f'{{"reason": "{form}"}}}}')]
    if end == "expired":
        plan.append(raw_event("session.expired", f'"reason": "{half_escaped(key)} expired"'))
    else:
        plan.append(raw_event("error", f'"error": {{"code": "invalid_request", "message": '
                                       f'"{escaped(authorization)} refused"}}'))
    return plan


class HostileVllm(HostileWS):
    """Serves ``plan`` (or ``plan_for(headers, n)`` to the n-th connection) to every session,
    after ``after`` appends."""

    def __init__(self, plan: Sequence[Message] = (), after: int = 2, plan_for=None,
                 created_message: str | None = None):
        super().__init__(self._session)
        self.plan, self.after, self.plan_for = list(plan), after, plan_for
        self.created_message = created_message or created()

    async def _session(self, ws: ServerConnection) -> None:
        plan = self.plan_for(ws.request.headers, self.connections) if self.plan_for \
            else self.plan
        await ws.recv()  # session.update
        await ws.send(self.created_message)
        appends = 0
        async for raw in ws:
            msg = json.loads(raw) if isinstance(raw, str) else {}
            kind = msg.get("type")
            if kind == "input_audio_buffer.append":
                appends += 1
                if appends == self.after:
                    for message in plan:
                        await ws.send(message)
            elif kind == "session.close":
                await ws.send(json.dumps({"type": "session.closed", "reason": "client"}))

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/v1/realtime?duplex=1"


async def _main() -> None:
    key = os.environ["VLLM_OMNI_API_KEY"]
    # session 1 is the preflight's probe (it appends nothing); the first trial's session is
    # lost, its retry ends in a final error: both paths of a session's end, one retry
    server = HostileVllm(after=2, plan_for=lambda headers, n: echo_plan(
        key, " / ".join(headers.get_all("Authorization")), "expired" if n <= 2 else "error"))
    async with server:
        print(f"PORT {server.port}", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


if __name__ == "__main__":
    asyncio.run(_main())
