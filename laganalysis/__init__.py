"""Lag rules (Burrow status, lag in seconds, catch-up ETA, history retention) and the Spark jobs.

Everything outside ``laganalysis.kafka_source``, ``laganalysis.jobs`` and ``laganalysis.run`` is
pure: no Django, no cluster client, no I/O. Spark executors import this package.
"""
