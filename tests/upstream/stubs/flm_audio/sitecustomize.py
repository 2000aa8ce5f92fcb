"""Put first on ``PYTHONPATH`` of FLM-Audio's process by tests/upstream/test_flm_audio.py: its
``flmaudio/models/loaders.py`` hard-codes the released Mimi's architecture (``_seanet_kwargs``,
``_quantizer_kwargs``, ``_transformer_kwargs``, read when ``get_mimi`` builds it), far too big
for CPU tests. When that module is imported, this shrinks those dicts in place (our seam; the
authors' file is not changed); everything else of Mimi, its loading and streaming is theirs.
The codebooks keep 2048 entries: FLM-Audio's LM emits codes 0-2047."""

import importlib.abc
import importlib.machinery
import sys

TARGET = "flmaudio.models.loaders"


def shrink(loaders) -> None:
    loaders._seanet_kwargs.update(n_filters=8, dimension=64)
    loaders._quantizer_kwargs.update(dimension=16, input_dimension=64, output_dimension=64)
    loaders._transformer_kwargs.update(d_model=64, num_heads=2, num_layers=1,
                                       dim_feedforward=128, input_dimension=64,
                                       output_dimensions=[64])


class _Shrink(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            shrink(module)

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _Shrink())
