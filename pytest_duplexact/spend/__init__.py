"""What a run takes, before and while it runs: the price table and a run's cost (``cost.py``,
``prices.toml``), the estimate before it starts (``estimate.py``), the budget that stops it
(``budget.py``) and the live pace, tally and time left (``pace.py``). The plugin asks them
before and during a run; the report reads the cost and the estimate's line."""
