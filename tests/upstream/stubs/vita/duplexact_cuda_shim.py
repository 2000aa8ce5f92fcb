"""The web demo's workers print ``torch.cuda.current_device()`` and ``get_device_name(0)``
before loading; on this CPU-only torch those raise. Imported by our stand-ins the workers
import first (vllm, the TTS decoder), it makes them answer for the CPU. Nothing else of
torch changes."""

import torch

torch.cuda.current_device = lambda: 0
torch.cuda.get_device_name = lambda *args, **kwargs: "cpu (duplexact stub)"
