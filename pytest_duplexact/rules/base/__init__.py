"""Deprecated for one release: ``pytest_duplexact.rules.base`` is
``pytest_duplexact.rules.action_rule``.

A package rather than a module file, so that the module's move stays a rename that git
follows when parallel changes to it are merged."""

import warnings

from .. import action_rule as _moved
from ..action_rule import *  # noqa: F403 (the old path's names)

warnings.warn("pytest_duplexact.rules.base is deprecated: "
              "import pytest_duplexact.rules.action_rule", DeprecationWarning, stacklevel=2)


def __getattr__(name: str):
    return getattr(_moved, name)
