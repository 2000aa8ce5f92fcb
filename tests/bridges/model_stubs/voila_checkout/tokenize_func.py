# A Voila checkout's tokenize_func.py; the fake is tests/bridges/model_stubs/voila.py.
from tests.bridges.model_stubs.voila import (  # noqa: F401
    AUDIO_SR,
    AUDIO_TOKEN_FORMAT,
    DEFAULT_ASSISTANT_TOKEN,
    DEFAULT_AUDIO_TOKEN,
    voila_input_format,
)
