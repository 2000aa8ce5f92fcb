"""Running a benchmark: the settings (settings.py), the selection of instances, the harness
that takes one instance through pipeline, listening and scoring, the run directory and its
journal (resume), the wiring of judges / transcriber / simulator, and the prefetcher."""
