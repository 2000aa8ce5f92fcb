"""Puts our stand-in for Mini-Omni2's networks in place before its ``server.py`` runs: the
server imports ``OmniVisionInference`` from ``inference_vision`` (the LLM, whisper, SNAC:
everything neural), and Python puts the script's own folder first on ``sys.path``, so a
module of that name on ``PYTHONPATH`` would lose; registering it here wins."""

import sys

import duplexact_mini_omni2

sys.modules["inference_vision"] = duplexact_mini_omni2
