"""Stands in for VITA's model package (``vita/``: the LLM, its audio encoder, the TTS
decoder): the web demo's workers import the Qwen2 model class (for its input embeddings) and
the TTS decoder from it. Linked into the run folder in place of the checkout's ``vita``."""
