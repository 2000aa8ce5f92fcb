"""Deprecated for one release: ``pytest_duplexact.bridges.moshi`` is
``pytest_duplexact.bridges.moshi_bridge``.

A package rather than a module file, so that the module's move stays a rename that git
follows when parallel changes to it are merged."""

import warnings

from .. import moshi_bridge as _moved
from ..moshi_bridge import *  # noqa: F403 (the old path's names)

warnings.warn("pytest_duplexact.bridges.moshi is deprecated: "
              "import pytest_duplexact.bridges.moshi_bridge", DeprecationWarning, stacklevel=2)


def __getattr__(name: str):
    return getattr(_moved, name)
