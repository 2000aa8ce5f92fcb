"""The paper's open models that run behind a model bridge of ours (``bridges/<module>.py``, in
the model's own environment), by name. ``BRIDGED`` is the one table of these names: their
rows in the table of built-ins (catalogue/builtins.py), their factories
(providers/named_bridge.py), their paper routes (catalogue/paper_models.py) and docs/models.md
follow it.
"""

from __future__ import annotations

from dataclasses import dataclass


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
