"""The paper's open models that run behind a model bridge of ours (``bridges/<module>.py``, in
the model's own environment), by name: ``--duplexact-model=flm-audio
--duplexact-model-option url=ws://gpu-box:8765`` is ``--duplexact-model=bridge`` with the same
options, plus a check that the server's READY names that model (a bridge of another model
at the URL is a configuration error, not a run of the wrong model). ``BRIDGED`` is the one
table of these names: their rows in the table of built-ins (models/builtins.py), their
paper routes (models/paper_models.py) and docs/models.md follow it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..adapter import Adapter


@dataclass(frozen=True)
class Bridged:
    title: str  # the model, as the paper's Table 14 names its checkpoint
    module: str  # pytest_duplexact.bridges.<module>
    args: str  # the bridge's own required arguments, as on its command line

    @property
    def command(self) -> str:
        """What to start on the model's machine, in its environment (``--host 0.0.0.0``: for
        the benchmark machine to reach it; an SSH tunnel needs no open port)."""
        return (f"python -m pytest_duplexact.bridges.{self.module} {self.args} --port 8765 "
                "--host 0.0.0.0")


BRIDGED: dict[str, Bridged] = {
    "flm-audio": Bridged("FLM-Audio (CofeAI/FLM-Audio)", "flm_audio",
                         "--checkpoint DIR --workaround all"),  # its HEAD's defects
    "bayling-duplex": Bridged("BayLing-Duplex (BayLing-Models/BayLing-Duplex)",
                              "bayling_duplex", "--model-path M --speech-tokenizer-path T "
                                                "--decoder-path D"),
    "voila": Bridged("Voila-Autonomous (maitrix-org/Voila-autonomous-preview)", "voila",
                     "--voila-repo VOILA --checkpoint DIR --audio-tokenizer TOKDIR"),
}


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
