"""Plugin runs in process (pytester) start in a bare folder: no pyproject, so pytest-asyncio
would warn that its loop scope is unset, into this run's own summary. Give them the checkout's
setting."""

import pytest


@pytest.fixture(autouse=True)
def _inner_runs_set_the_loop_scope(request):
    if "pytester" in request.fixturenames:
        request.getfixturevalue("pytester").makeini(
            "[pytest]\nasyncio_default_fixture_loop_scope = function\n")
