"""The report tests' plugin runs in process get the checkout's pytest-asyncio loop
scope (tests/support/inner_runs.py)."""

from tests.fakes import openai_server  # noqa: F401 (a fixture: test_rescore.py)
from tests.support.inner_runs import inner_runs_set_the_loop_scope  # noqa: F401 (a fixture)
