"""Put in front of Lychee-FD's ``lychee_fd/app.py`` (first on its PYTHONPATH): the module holding
its generator, ``lychee_fd.runtime.vllm_generation`` (vLLM, the model), is served by our
``lychee_stub_generation`` instead; nothing else of the checkout is replaced."""

import importlib.abc
import importlib.util
import os
import sys

_STUB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lychee_stub_generation.py")


class _StubGenerator(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "lychee_fd.runtime.vllm_generation":
            return importlib.util.spec_from_file_location(name, _STUB)
        return None


sys.meta_path.insert(0, _StubGenerator())
