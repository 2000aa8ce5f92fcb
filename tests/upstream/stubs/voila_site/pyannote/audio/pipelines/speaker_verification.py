"""The name Voila's ``spkr.py`` imports (and never calls)."""


class PretrainedSpeakerEmbedding:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("not used by Voila's SpeakerEmbedding")
