"""The catalogue: the table of built-in models and what each needs (builtins.py, requirements.py),
and the paper's models and their routes (paper_models.py)."""
