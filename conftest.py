"""The plugin's own tests drive pytest in subprocesses and temp dirs through pytester."""

pytest_plugins = ["pytester"]
