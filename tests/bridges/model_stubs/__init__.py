"""Stand-ins for the model bridges' model APIs (tests/bridges/test_*_bridge.py), written from
the real signatures read in each model's repository (named in each module), never a copy of
their code. Each fake is deterministic and transparent, so a test can say exactly which input
frame an output frame or a word came from:

* ``flm``: FLM-Audio's ``get_mimi`` / ``LMGen`` / ``FLMAudioForCausalLM``;
* ``bayling``: BayLing-Duplex's ``BayLingDuplex`` (``stream_audio_tokens``,
  ``stream_tokens_to_audio``, ``tokenize_audio``);
* ``voila``: Voila's ``VoilaAutonomousModel.run_generate``, ``VoilaTokenizer``,
  ``SpeakerEmbedding`` and ``voila_input_format``;
* ``tokenizer``: a Hugging Face-like text tokenizer over a ``vocab.json``.

``site/`` holds the import names the bridges use (``flmaudio``, ``bayling_duplex``,
``transformers``, ``torchaudio``) and ``voila_checkout/`` the files of a Voila checkout; both
only ever go on a bridge *subprocess*'s ``PYTHONPATH`` (or ``--voila-repo``), never on the test
process's ``sys.path``, where they would shadow real packages.
"""

from pathlib import Path

SITE = Path(__file__).parent / "site"
VOILA_CHECKOUT = Path(__file__).parent / "voila_checkout"

# Audio values encode codes: a frame of constant value v carries code round(v * SCALE).
SCALE = 1000.0
