"""The generator of the bundled fixture set (fixtures/, docs/fixtures.md).

``python -m pytest_duplexact.fixturegen`` renders fixtures/source/transcripts.toml with
espeak-ng into a DuplexAct dataset folder (``dataset_writer.generate``). Used only to (re)build
fixtures; nothing at benchmark run time imports it.
"""
