"""Stands in for torchaudio, which has no build for this CPU torch: Freeze-Omni's server
imports it and uses only ``compliance.kaldi.fbank`` (web/vad.py), whose features go to the
(stubbed) speech LLM alone; silero-vad imports it and uses nothing of it while serving."""
