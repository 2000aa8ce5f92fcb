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
