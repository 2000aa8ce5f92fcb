"""Checkout-wide test settings. pytester is enabled through `addopts = -p pytester` in
pyproject.toml (a `pytest_plugins` here would break `pytest --duplexact-model=...` run from
another directory against an editable install, where this file sits above the suites)."""

try:
    from hypothesis import HealthCheck, settings
except ImportError:  # hypothesis is a dev dependency; a user's benchmark run needs none
    pass
else:
    # CI machines are small and shared: no per-example deadline, same example budget.
    settings.register_profile("ci", deadline=None,
                              suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("ci")


def pytest_addoption(parser, pluginmanager):
    """pyproject.toml sets pytest-asyncio's keys for our own tests. Where that plugin is absent
    (a benchmark-only install, `pip install -e .`) pytest would warn "Unknown config option"
    for each of them on the README's benchmark command run in the checkout; declared here
    they are read by nothing and say nothing. With the plugin they are its own."""
    if not pluginmanager.has_plugin("asyncio"):
        for key in ("asyncio_mode", "asyncio_default_fixture_loop_scope"):
            parser.addini(key, "pytest-asyncio's setting (pytest-asyncio is not installed)")
