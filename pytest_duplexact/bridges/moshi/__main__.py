"""``python -m pytest_duplexact.bridges.moshi``, deprecated for one release: the command is
``python -m pytest_duplexact.bridges.moshi_bridge``, which this runs."""

import warnings

from ..moshi_bridge import main

warnings.warn("python -m pytest_duplexact.bridges.moshi is deprecated: run "
              "python -m pytest_duplexact.bridges.moshi_bridge", DeprecationWarning, stacklevel=1)
raise SystemExit(main())
