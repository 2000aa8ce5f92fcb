# The import name the BayLing-Duplex bridge uses; the fake is tests/bridges/model_stubs/bayling.py.
from tests.bridges.model_stubs.bayling import BayLingDuplex  # noqa: F401
