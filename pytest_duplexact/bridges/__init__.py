"""The bridge kit: run a model in its own environment behind the duplexact bridge protocol v1
(docs/bridge-protocol.md), and the plugin drives it with ``--duplexact-model=bridge``.

The kit (this package's ``wire`` and ``kit`` modules) imports only the standard library,
numpy and ``websockets``: ``pip install --no-deps pytest-duplexact websockets`` beside the
model's own install is enough. ``tests/bridges/test_kit_imports.py`` holds it to that.

The contract a model bridge implements
--------------------------------------
A **model** object, built once per process (weights loaded once). ``BridgeModel`` (kit.py)
declares the optional parts with their defaults (``name`` "": the class's name,
``transcript`` False, ``max_sessions`` None: one trial unless ``--max-sessions`` asks more,
``warmup`` None, a ``close`` that does nothing); deriving from it is optional, a plain class
declaring the same is read alike::

    class MyBridge(BridgeModel):
        name = "my-model"          # shown in READY and in the server's log
        mode = "stepped"           # or "streaming" (below)
        sample_rate = 24_000       # Hz of the audio both ways
        frame = 1_920              # samples per step (80 ms here)
        transcript = True          # step() returns the model's own words as text
        max_sessions = 1           # optional: trials at once (default 1; others wait; the
                                   # most --max-sessions may ask; READY says it)

        def open(self, options: dict[str, str], trial: Trial) -> Session:
            '''A fresh session for one trial (one connection): all per-trial state lives in
            it, so nothing leaks into the next trial. ``options`` are the query parameters
            (strings; ``typed_options`` converts and checks them; raise to refuse: the client
            gets ERROR). ``trial.seed`` is the run's seed: seed sampling from it.'''

        def warmup(self) -> None:  # optional: once, before the server listens
            '''Run a few frames through a throwaway session (compiles lazily compiled
            kernels, captures CUDA graphs, fills caches), leaving no state behind. The kit
            calls it in the thread that runs every step, before it binds the port, and logs
            how long it took; ``--no-warmup`` skips it. A model that compiles at its first
            step needs one: else that step (seconds to a minute) counts against the
            client's ``step_timeout``.'''

        def close(self) -> None:   # optional: the server is shutting down
            ...

        def step_batch(self, steps):  # optional, stepped: one call for every open trial
            '''``steps``: [(session, frame), ...]; returns [answer, ...] in that order, each
            what ``session.step(frame)`` would return, or an Exception for that trial alone
            (``BatchStepper`` in kit.py; with ``max_sessions = B`` B trials share a step).'''

A **session** (what ``open`` returns)::

        def step(self, frame: np.ndarray) -> np.ndarray | tuple[np.ndarray, Sequence[str]]:
            '''``frame``: float32 mono, exactly ``model.frame`` samples at ``sample_rate``:
            the input for one step. Returns the model's audio for the same instant (stepped:
            exactly ``frame`` samples; a model with internal delay returns its delayed audio,
            silence while it has none) and, optionally, the text of its own speech that
            starts being heard in this step (str or list of str; a leading space begins a new
            word, as in "▁"-prefixed SentencePiece pieces).'''

        def close(self) -> None:
            '''End of the trial (always called, also after an error): free the state.'''

Modes. ``stepped``: lockstep, one AUDIO frame in, TEXT* then exactly one AUDIO frame out;
the plugin waits for each answer, so the model runs as fast as it computes and the result is
frame-exact and deterministic. ``streaming``: the client sends audio on the wall clock (in
``frame``-sized AUDIO messages); the kit still calls ``step`` once per whole frame and sends
whatever it returns at once (any length, also empty: nothing to say yet).

Errors. An exception from ``open``/``step`` ends the trial with ERROR (the plugin scores the
instance as a model error, never as a miss) and a traceback in the server log. A model that
cannot go on (a token budget ran out) raises ``SessionEnded(reason)`` from ``step``: the kit
sends CLOSE with the reason, which the plugin also scores as a model error (cut short).

Serving. ``main(build, prog=...)`` is the command line (``--host --port --certfile --keyfile
--max-sessions --log-level`` plus yours through ``add_arguments``); ``python -m pytest_duplexact.bridges.X``
calls it from ``X``'s ``if __name__ == "__main__"``. ``BridgeServer(model).start(host, port)``
serves from your own asyncio code. docs/models.md has a complete ~30-line example.
"""

from .kit import (
                  KEY_ENV,
                  BridgeModel,
                  BridgeServer,
                  OptionError,
                  SessionEnded,
                  Stepper,
                  Trial,
                  WarmupFailed,
                  answer,
                  main,
                  parser,
                  typed_options,
)
from .wire import ProtocolError, Ready

__all__ = ["BridgeModel", "BridgeServer", "KEY_ENV", "OptionError", "ProtocolError", "Ready",
           "SessionEnded", "Stepper", "Trial", "WarmupFailed", "answer", "main", "parser",
           "typed_options"]
