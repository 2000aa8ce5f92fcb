"""The ground floor: plain data and its files. The taxonomy, instances and their loader,
timelines, results, the Recording type and its files, audio I/O, usage counters, atomic
writes. Nothing here imports a higher floor (tests/test_imports.py)."""
