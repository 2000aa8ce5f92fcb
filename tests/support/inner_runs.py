"""A folder's plugin runs in process (pytester.runpytest) start in a bare folder: no
pyproject, so pytest-asyncio (our dev extra) warns that its loop scope is unset, and the
warning lands in the outer run's summary. A conftest that imports this fixture gives every
such run the checkout's setting. Not global: the tests of a user's bare folder (pytest-asyncio
blocked with ``-p no:asyncio``) must see no asyncio ini key, which would warn "Unknown config
option" there."""

import pytest


@pytest.fixture(autouse=True)
def inner_runs_set_the_loop_scope(request):
    if "pytester" in request.fixturenames:
        request.getfixturevalue("pytester").makeini(
            "[pytest]\nasyncio_default_fixture_loop_scope = function\n")
