"""The one error of the released-data source, in a module of its own so that the package's
children (hub, snapshot, mapping, convert, cli) import it without importing the package's
``__init__``, which imports them back lazily."""


class ReleasedDataError(Exception):
    """The released data cannot be used as asked; the message says why and what to do."""
