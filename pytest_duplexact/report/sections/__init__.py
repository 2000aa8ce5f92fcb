"""The report's sections computed when it is built (report/builder.py), each from the
outcomes, the summary or a stored report: the gates, the baseline comparison, the judges,
the harness's clock, the paper side by side, robustness by channel, and the checks of a
stored report's counts."""
