# The import name the bridges use for AutoTokenizer; tests/bridges/model_stubs/tokenizer.py.
from tests.bridges.model_stubs.tokenizer import AutoTokenizer  # noqa: F401

__version__ = "4.51.3"  # the version Voila's code runs on (bridges/voila.py)
