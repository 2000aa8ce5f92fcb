"""What ``launch_worker.py --role head`` starts in the demo's worker container, stood up in the
gateway's process for the harness (``ray.init`` of our in-process Ray calls ``start``): the
authors' ``RouterActor`` named ``fd_router`` and one authors' ``RaonWorkerActor`` with
``FD_MAX_SESSIONS_PER_GPU`` sessions (default 2, as compose), registered as ``worker-gpu0``.

Only the network is replaced: ``RaonEngine.load_model`` loads no SGLang model and
``RaonWorkerSession``'s model calls (``init``, ``_ensure_decoding_state``, ``step``, ``close``)
drive ``duplexact_turns.TurnTaker`` instead. Everything else of the engine is the authors'
(``RaonEngine``: sessions, capacity, locks, ``feed_audio``, ``run_step``, idle cleanup;
``SessionState``; ``RaonWorkerSession.feed_audio``'s backlog policy), and ``step`` takes one
1920-sample frame from ``state.raw_input_bytes`` per call as the authors' does.
"""

from __future__ import annotations

import os
import time

import numpy as np
from duplexact_turns import TurnTaker


def _stub_engine() -> None:
    from proto.messages import Frame
    from worker import engine, session

    class StubWorkerSession(session.RaonWorkerSession):
        @staticmethod
        def init(model, session_config, tokenizer, speaker_embeds=None):
            return session.SessionState(session_id=session_config.session_id,
                                        config=session_config)

        @staticmethod
        def _ensure_decoding_state(model, state):
            if state.decoding_state is None:
                state.decoding_state = TurnTaker(state.session_id,
                                                 state.config.audio.sampling_rate)

        @staticmethod
        def step(model, state, tokenizer):
            needed = state.config.audio.frame_size * 4
            if len(state.raw_input_bytes) < needed:
                return []
            StubWorkerSession._ensure_decoding_state(model, state)
            pcm = np.frombuffer(bytes(state.raw_input_bytes[:needed]), np.float32).copy()
            del state.raw_input_bytes[:needed]
            state.frames_in += 1
            out, text = state.decoding_state.step(pcm)
            sid = state.session_id
            frames = [Frame.seq_delta(f"frame={state.frames_in} text={text!r}", session_id=sid)]
            if text:
                frames.append(Frame.text(text, session_id=sid))
            frames.append(Frame.audio(out, session_id=sid))
            state.frames_out += 1
            state.touch()
            return frames

        @staticmethod
        def close(model, state, *, skip_gpu_cleanup=False):
            if state.decoding_state is not None:
                state.decoding_state.close()
            state.decoding_state = None
            state.raw_input_bytes.clear()

    def load_model(self) -> None:  # no SGLang model, no tokenizer download
        self._model = object()
        self._tokenizer = object()
        self._started_at = time.time()

    engine.RaonWorkerSession = StubWorkerSession
    engine.RaonEngine.load_model = load_model


def start() -> None:
    import ray
    from proto.config import WorkerConfig
    from router.actor import make_router_actor_cls
    from worker.actor import get_raon_actor_cls

    _stub_engine()
    per_gpu = int(os.environ.get("FD_MAX_SESSIONS_PER_GPU", "2"))
    router = make_router_actor_cls().options(name="fd_router").remote(
        health_interval=5.0, reconcile_interval=7.5, health_timeout=20.0, reserved_ttl_sec=15.0)
    worker = get_raon_actor_cls().remote()
    ray.get(worker.initialize.remote(WorkerConfig(gpu_id=0, max_sessions=per_gpu)))
    ray.get(router.register_worker.remote("worker-gpu0", worker, 0, per_gpu))
