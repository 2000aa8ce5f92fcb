# The import name the bridges use for AutoTokenizer; tests/bridges/model_stubs/tokenizer.py.
from tests.bridges.model_stubs.tokenizer import AutoTokenizer  # noqa: F401
