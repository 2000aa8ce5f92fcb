"""The paper's open models that run behind a model bridge of ours (``bridges/<module>.py``, in
the model's own environment), by name: ``--duplexact-model=flm-audio
--duplexact-model-option url=ws://gpu-box:8765`` is ``--duplexact-model=bridge`` with the same
options, plus a check that the server's READY names that model (a bridge of another model
at the URL is a configuration error, not a run of the wrong model). One factory per row of
``BRIDGED`` (catalogue/model_bridges.py).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..adapter import Adapter
from ..catalogue.model_bridges import BRIDGED


def _factory(name: str) -> Adapter:
    def client(options: dict[str, Any]):
        from ..model_options import ModelConfigError
        from .bridge import client_from, meant

        if not options.get("url"):
            typo = meant({k: str(v) for k, v in options.items()})
            if typo:
                raise ModelConfigError(f"{name}: no url option{typo}")
            raise ModelConfigError(f"{name}: no server. Start {BRIDGED[name].command} on the "
                                   "model's machine, in its environment (docs/models.md), "
                                   "and pass --duplexact-model-option url=ws://HOST:8765")
        return replace(client_from(options), label=name)

    def served(c: Any, ready: Any) -> None:
        from ..model_options import ModelConfigError

        if ready.model and ready.model != name:
            raise ModelConfigError(f"{name}: the bridge at {c.url} serves {ready.model!r}, not "
                                   f"{name!r}; start {BRIDGED[name].command} on the model's "
                                   f"machine, or run --duplexact-model=bridge")

    def factory(**options: Any):
        from .bridge import model_for

        c = client(options)
        model = model_for(c)
        served(c, model.ready)
        return model

    def preflight(**options: Any) -> None:
        client(options)  # the options, the URL and the key rule, without connecting

    def probed(**options: Any):
        """The run's preflight and ``duplexact models NAME --option url=...``: connect
        once; which model answers (refused when it is not this one)."""
        from .bridge import probe, probed_as

        c = client(options)
        r = probe(c)
        served(c, r)
        return probed_as(r, c, name)

    def reach(**options: Any) -> str:
        return probed(**options).description

    return Adapter(factory, preflight=preflight, reach=reach, probe=probed,
                   name=name.replace("-", "_"))


flm_audio = _factory("flm-audio")
bayling_duplex = _factory("bayling-duplex")
voila = _factory("voila")
