"""tests/upstream: our real adapters and bridges driven against the authors' own server and
model code (checkouts named by $DUPLEXACT_UPSTREAM_DIR; every such test skips, naming it, when
it is unset; test_harness.py checks the harness's own pieces and always runs). One module per
model; see tests/upstream/support.py for the layout."""

import pytest


@pytest.fixture(scope="module", autouse=True)
def _no_bytecode_in_checkouts():
    """Every process a module starts writes no ``__pycache__``: the bridges, their probes and
    vLLM-Omni's child import the author's modules from the checkout (its path first on
    ``PYTHONPATH``), and Python would otherwise cache their bytecode inside it, which the
    harness never writes into (support.Server and tone_bridged set the same for theirs).
    Where this variable is unset (.ci/run unsets it) this is the only thing that keeps them out."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONDONTWRITEBYTECODE", "1")
        yield
