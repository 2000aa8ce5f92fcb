"""The one error of the released-data source, in a module of its own so that the package's
children (hub, snapshot, mapping, convert, cli) import it without importing the package's
``__init__``, which imports them back lazily; and the option names its messages give, which
depend on the caller (``pytest --duplexact-data=hf:...`` or ``duplexact import`` /
``inspect``)."""

from __future__ import annotations

from dataclasses import dataclass


class ReleasedDataError(Exception):
    """The released data cannot be used as asked; the message says why and what to do."""


@dataclass(frozen=True)
class Options:
    """The options a message tells the user to pass, as the caller's command spells them."""

    mapping: str  # takes the user's mapping file
    skip: str  # leaves the unmappable rows out
    out: str | None = None  # names the folder written; None: the conversion cache


PYTEST_OPTIONS = Options("--duplexact-data-mapping", "--duplexact-skip-unmappable")
COMMAND_OPTIONS = Options("--mapping", "--skip-unmappable", "--out")
