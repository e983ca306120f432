"""The Spark jobs over lag history and topic data; each is ``run(spark, params) -> JobResult``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from laganalysis.jobs import anomalies, correlation, eta, hot_partitions, lag_summary, sla
from laganalysis.jobs.result import JobResult, ParamError, Series, Table

Job = Callable[[Any, Mapping[str, Any]], JobResult]

JOBS: dict[str, Job] = {
    "lag_summary": lag_summary.run,
    "eta": eta.run,
    "sla": sla.run,
    "hot_partitions": hot_partitions.run,
    "anomalies": anomalies.run,
    "correlation": correlation.run,
}

__all__ = ["JOBS", "JobResult", "ParamError", "Series", "Table"]
