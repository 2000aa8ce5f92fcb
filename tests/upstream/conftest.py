"""tests/upstream: our real adapters and bridges driven against the authors' own server and
model code (checkouts named by $DUPLEXACT_UPSTREAM_DIR; every such test skips, naming it, when
it is unset; test_harness.py checks the harness's own pieces and always runs). One module per
model; see tests/upstream/support.py for the layout."""
