"""The plumbing every remote call shares (the judges, the LLM simulator, the whisper-1
transcriber, the hosted models): ``calls`` (cache first, bounded retries, counted),
``cache`` (the request cache), ``retry`` (the one retry policy), ``netsafety`` (where a key may
travel, ``Secret``, the log filter that masks keys) and ``wav`` (audio as a WAV upload).

Just above ``data/``: it knows nothing of rules, models or judges. Nothing is imported here, so
``remote.retry`` or ``remote.netsafety`` costs no HTTP library.
"""
