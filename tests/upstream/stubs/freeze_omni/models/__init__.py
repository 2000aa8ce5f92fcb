"""Stands in for Freeze-Omni's ``models`` package (its networks): the server imports
``models.pipeline`` (the speech LLM and its state head) and ``models.decoder.llm2tts`` (the
speech decoder) and nothing else of it. A regular package, so it wins over the checkout's
namespace package of the same name whatever the order on ``PYTHONPATH``.

The one change outside the networks: ``bin/server.py`` calls ``.cuda()`` on a tensor of token
ids; on this CPU-only torch that is made a no-op."""

import torch

torch.Tensor.cuda = lambda self, *args, **kwargs: self
