# A Voila checkout's voila_tokenizer.py; the fake is tests/bridges/model_stubs/voila.py.
from tests.bridges.model_stubs.voila import VoilaTokenizer  # noqa: F401
