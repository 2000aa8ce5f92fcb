"""Stand-ins for the networks (and only the networks) behind the authors' own code: ours,
deterministic, so every timing the harness measures can be held against what the stub decided.
Loaded into the author's process from ``PYTHONPATH`` (a ``sitecustomize`` or a module of the
same name placed first on the path), never copied into the checkout."""
