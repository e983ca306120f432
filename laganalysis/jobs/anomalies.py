"""Lag against a seasonal baseline: each hour of a group's lag compared with the same hour of
day on the same day of week in the rest of the history.

A group's hourly lag is the mean, over the hour's samples, of the group's total lag. Its
baseline is the mean and standard deviation of the other hours with the same (day of week,
hour of day); the hour is an anomaly when it is more than ``z`` (default 3) deviations above,
with at least ``min_history`` (default 2) such hours to compare with. The deviation counts as
at least a tenth of the baseline (and at least one offset), so a nearly flat baseline does not
turn every small wobble into an anomaly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F

from laganalysis.jobs.history import check_input, lag_samples
from laganalysis.jobs.result import JobResult, ParamError, Series, Table

COLUMNS = ("group", "hour", "day_of_week", "hour_of_day", "lag", "baseline", "stddev", "z")


def check(params: Mapping[str, Any]) -> None:
    check_input(params)
    _settings(params)


def _settings(params: Mapping[str, Any]) -> tuple[float, int]:
    try:
        z, min_history = float(params.get("z", 3.0)), int(params.get("min_history", 2))
    except (TypeError, ValueError) as exc:
        raise ParamError(f"z and min_history must be numbers: {exc}") from exc
    if z <= 0 or min_history < 1:
        raise ParamError("z must be positive and min_history at least 1")
    return z, min_history


def run(spark: SparkSession, params: Mapping[str, Any]) -> JobResult:
    z, min_history = _settings(params)
    totals = (
        lag_samples(spark, params)
        .groupBy("group", "ts")
        .agg(F.sum("lag").alias("total"))
        .withColumn("hour", F.floor(F.col("ts") / 3600) * 3600)
        .groupBy("group", "hour")
        .agg(F.avg("total").alias("lag"))
        .withColumn("at", F.timestamp_seconds("hour"))
        .withColumn("day_of_week", F.dayofweek("at"))
        .withColumn("hour_of_day", F.hour("at"))
    )
    season = Window.partitionBy("group", "day_of_week", "hour_of_day")
    # The baseline leaves the hour itself out: sums over the season minus this hour.
    n = F.count(F.lit(1)).over(season) - 1
    s1 = F.sum("lag").over(season) - F.col("lag")
    s2 = F.sum(F.col("lag") * F.col("lag")).over(season) - F.col("lag") * F.col("lag")
    scored = (
        totals.withColumn("n", n)
        .withColumn("baseline", s1 / F.col("n"))
        .withColumn(
            "stddev",
            F.sqrt(F.greatest(F.lit(0.0), s2 / F.col("n") - F.col("baseline") * F.col("baseline"))),
        )
        .withColumn(
            "z",
            (F.col("lag") - F.col("baseline"))
            / F.greatest(F.col("stddev"), F.col("baseline") * 0.1, F.lit(1.0)),
        )
    )
    flagged = scored.where((F.col("n") >= min_history) & (F.col("z") > z))
    rows = [r.asDict() for r in flagged.select(*COLUMNS).orderBy("group", "hour").collect()]
    result = JobResult("anomalies")
    result.tables["anomalies"] = Table.of(COLUMNS, rows)
    hourly = scored.select("group", "hour", "lag", "baseline").orderBy("hour").collect()
    xs = sorted({int(r.hour) for r in hourly})
    index = {x: i for i, x in enumerate(xs)}
    y: dict[str, list[float | None]] = {}
    for r in hourly:
        for name, value in ((r.group, r.lag), (f"{r.group} baseline", r.baseline)):
            y.setdefault(name, [None] * len(xs))[index[int(r.hour)]] = value
    result.charts["hourly_lag"] = Series(xs, y)
    return result
