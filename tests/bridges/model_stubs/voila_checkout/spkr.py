# A Voila checkout's spkr.py; the fake is tests/bridges/model_stubs/voila.py.
from tests.bridges.model_stubs.voila import SpeakerEmbedding  # noqa: F401
