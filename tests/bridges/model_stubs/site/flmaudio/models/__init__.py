# The import name the FLM-Audio bridge uses; the fake lives in tests/bridges/model_stubs/flm.py.
from tests.bridges.model_stubs.flm import FLMAudioForCausalLM, LMGen, MimiModel, get_mimi  # noqa: F401
