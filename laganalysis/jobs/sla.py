"""SLA per group in seconds: minutes in breach over the window and the error budget left.

A minute is in breach when the group's largest lag in seconds sampled in it exceeds the
group's threshold (``thresholds`` by group, else ``threshold_s``; default 300, the common
"warning" tier). The objective (default 0.99) is the fraction of the window's minutes that
must be within the SLA; the budget is the rest, and what is left of it may go negative.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from laganalysis.jobs.history import check_input, lag_samples, window_bounds
from laganalysis.jobs.result import JobResult, ParamError, Series, Table

COLUMNS = (
    "group",
    "threshold_s",
    "window_minutes",
    "observed_minutes",
    "breach_minutes",
    "budget_minutes",
    "budget_left_minutes",
    "budget_left_fraction",
)


def check(params: Mapping[str, Any]) -> None:
    check_input(params)
    _settings(params)


def run(spark: SparkSession, params: Mapping[str, Any]) -> JobResult:
    default, thresholds, objective = _settings(params)
    since, until = window_bounds(params)
    per_minute = (
        lag_samples(spark, params)
        .withColumn("minute", F.floor(F.col("ts") / 60) * 60)
        .groupBy("group", "minute")
        .agg(F.max("lag_seconds").alias("worst_s"))
    )
    limit = F.coalesce(
        F.element_at(
            F.create_map(*[F.lit(x) for kv in thresholds.items() for x in kv]), F.col("group")
        )
        if thresholds
        else F.lit(None),
        F.lit(float(default)),
    )
    marked = per_minute.withColumn("threshold_s", limit).withColumn(
        "breach", F.col("worst_s") > F.col("threshold_s")
    )
    totals = marked.groupBy("group", "threshold_s").agg(
        F.count(F.lit(1)).alias("observed"),
        F.sum(F.col("breach").cast("int")).alias("breaches"),
        F.min("minute").alias("first"),
        F.max("minute").alias("last"),
    )
    rows = []
    for r in totals.orderBy("group").collect():
        start = since if since is not None else r.first
        stop = until if until is not None else r.last + 60
        minutes = (stop - start) / 60
        budget = (1 - objective) * minutes
        left = budget - r.breaches
        rows.append(
            {
                "group": r.group,
                "threshold_s": r.threshold_s,
                "window_minutes": minutes,
                "observed_minutes": r.observed,
                "breach_minutes": r.breaches,
                "budget_minutes": budget,
                "budget_left_minutes": left,
                "budget_left_fraction": left / budget if budget else None,
            }
        )
    result = JobResult("sla")
    result.tables["groups"] = Table.of(COLUMNS, rows)
    result.charts["breach_minutes"] = Series(
        [r["group"] for r in rows], {"breach_minutes": [r["breach_minutes"] for r in rows]}
    )
    return result


def _settings(params: Mapping[str, Any]) -> tuple[float, dict[str, float], float]:
    try:
        default = float(params.get("threshold_s", 300))
        thresholds = {str(g): float(s) for g, s in dict(params.get("thresholds") or {}).items()}
        objective = float(params.get("objective", 0.99))
    except (TypeError, ValueError) as exc:
        raise ParamError(f"thresholds and objective must be numbers: {exc}") from exc
    if default <= 0 or any(s <= 0 for s in thresholds.values()):
        raise ParamError("an SLA threshold must be a positive number of seconds")
    if not 0 < objective < 1:
        raise ParamError(f"objective must be between 0 and 1 (exclusive), got {objective}")
    return default, thresholds, objective
