"""Lag rules (Burrow status, lag in seconds, catch-up ETA, history retention) and the Spark jobs.

Everything outside ``laganalysis.jobs``, ``laganalysis.run`` and ``laganalysis.session`` is
pure: no Django, no cluster client, no I/O. Spark executors import this package.
"""
