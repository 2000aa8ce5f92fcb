# A Voila checkout's model.py, as the bridge imports it; the fake is tests/bridges/model_stubs/voila.py.
from tests.bridges.model_stubs.voila import VoilaAutonomousModel  # noqa: F401
