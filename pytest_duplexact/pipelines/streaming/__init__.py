"""Deprecated for one release: ``pytest_duplexact.pipelines.streaming`` is
``pytest_duplexact.pipelines.streaming_duplex``.

A package rather than a module file, so that the module's move stays a rename that git
follows when parallel changes to it are merged."""

import warnings

from .. import streaming_duplex as _moved
from ..streaming_duplex import *  # noqa: F403 (the old path's names)

warnings.warn("pytest_duplexact.pipelines.streaming is deprecated: "
              "import pytest_duplexact.pipelines.streaming_duplex",
              DeprecationWarning, stacklevel=2)


def __getattr__(name: str):
    return getattr(_moved, name)
