"""pytest glue (thin): options, collection of the suites, fixtures, report hooks."""
