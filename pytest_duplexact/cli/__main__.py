"""``python -m pytest_duplexact.cli``: the ``duplexact`` command."""

import sys

from . import main

sys.exit(main())
