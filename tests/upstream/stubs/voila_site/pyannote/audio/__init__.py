"""pyannote.audio as Voila's ``spkr.py`` uses it, the speaker network stubbed: the real
``Model.from_pretrained`` downloads pyannote/wespeaker-voxceleb-resnet34-LM from the hub.
Ours answers every recording with the same 256-dim embedding (zeros), the size Voila's
``ref_emb_linear`` takes."""

import torch


class Model(torch.nn.Module):
    @classmethod
    def from_pretrained(cls, checkpoint, **_):
        return cls()

    def forward(self, waveforms):  # [batch, channels, samples] -> [batch, 256]
        return torch.zeros(waveforms.shape[0], 256)
