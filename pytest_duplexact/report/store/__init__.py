"""Reports kept on disk and combined: the run store (``saved.py``: autosave, compare with a
stored run) and ``merge.py`` (shard reports into one, ``duplexact merge``)."""
