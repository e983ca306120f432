"""The Spark jobs over lag history and topic data; each is ``run(spark, params) -> JobResult``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from laganalysis.jobs import anomalies, correlation, eta, hot_partitions, lag_summary, sla
from laganalysis.jobs.result import JobResult, ParamError, Series, Table

Job = Callable[[Any, Mapping[str, Any]], JobResult]
Check = Callable[[Mapping[str, Any]], None]

JOBS: dict[str, Job] = {
    "lag_summary": lag_summary.run,
    "eta": eta.run,
    "sla": sla.run,
    "hot_partitions": hot_partitions.run,
    "anomalies": anomalies.run,
    "correlation": correlation.run,
}

# What each job checks of its parameters before a Spark session exists (a JVM start is
# seconds): the same checks `run` makes, raising the same ParamError.
CHECKS: dict[str, Check] = {
    "lag_summary": lag_summary.check,
    "eta": eta.check,
    "sla": sla.check,
    "hot_partitions": hot_partitions.check,
    "anomalies": anomalies.check,
    "correlation": correlation.check,
}

__all__ = ["CHECKS", "JOBS", "JobResult", "ParamError", "Series", "Table"]
