"""Writes the VAD network the web demo loads (``torch.jit.load(resources/silero_vad.jit)``,
a silero VAD the README has you download) as our own TorchScript module: the speech
probability of a chunk is 1 when its RMS is at least duplexact_stub.SPEECH_RMS, else 0;
``reset_states`` keeps nothing. Run with the author's environment's Python:

    python make_vad.py OUT.jit
"""

import sys

import duplexact_stub as stub
import torch


class EnergyVAD(torch.nn.Module):
    def __init__(self, threshold: float):
        super().__init__()
        self.threshold = threshold

    def forward(self, x: torch.Tensor, sr: int) -> torch.Tensor:
        rms = torch.sqrt(torch.mean(x.float() ** 2))
        return (rms >= self.threshold).float().reshape(1, 1)

    @torch.jit.export
    def reset_states(self) -> None:
        pass


if __name__ == "__main__":
    torch.jit.script(EnergyVAD(stub.SPEECH_RMS)).save(sys.argv[1])
