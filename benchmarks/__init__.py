"""The benchmark scripts: each prints figures (speed, memory, timing accuracy), never a
verdict. Run them from the repository root as modules, ``python -m benchmarks.<name>``, so
that the package, ``benchmarks`` and ``tests`` import by name (the fakes under tests/fakes and
the test kit under tests/support; never a test module). docs/benchmarks.md has the figures."""
