# The import name the Voila bridge uses to read --ref-audio (torchaudio.load).
import torch


def load(path):
    return torch.zeros(1, 16000), 16000
