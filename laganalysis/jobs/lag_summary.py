"""Lag summary per group/topic/partition over a window: offsets and seconds min/avg/p95/max, and
the seconds spent in each Burrow status (each sample holds until the next one)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from laganalysis.burrow import Status
from laganalysis.jobs.history import lag_samples
from laganalysis.jobs.result import JobResult, Series, Table

KEY = ["group", "topic", "partition"]
STATUSES = [s.name for s in Status if s is not Status.NOTFOUND]
COLUMNS = (
    *KEY,
    "samples",
    *(f"lag_{m}" for m in ("min", "avg", "p95", "max")),
    *(f"lag_seconds_{m}" for m in ("min", "avg", "p95", "max")),
    *(f"seconds_{s}" for s in STATUSES),
)


def run(spark: SparkSession, params: Mapping[str, Any]) -> JobResult:
    samples = lag_samples(spark, params)
    rows = [r.asDict() for r in summarize(samples).orderBy(*KEY).collect()]
    result = JobResult("lag_summary")
    result.tables["partitions"] = Table.of(COLUMNS, rows)
    result.charts["group_max_lag"] = _max_lag_chart(samples, int(params.get("bucket_s", 60)))
    return result


def summarize(samples: DataFrame) -> DataFrame:
    """One row per partition; the heavy part, in Spark."""
    following = Window.partitionBy(*KEY).orderBy("ts")
    held = samples.withColumn(
        "held_s", F.coalesce(F.lead("ts").over(following) - F.col("ts"), F.lit(0.0))
    )
    stats = [F.count(F.lit(1)).alias("samples")]
    for col, name in (("lag", "lag"), ("lag_seconds", "lag_seconds")):
        stats += [
            F.min(col).alias(f"{name}_min"),
            F.avg(col).alias(f"{name}_avg"),
            F.percentile(col, 0.95).alias(f"{name}_p95"),
            F.max(col).alias(f"{name}_max"),
        ]
    stats += [
        F.sum(F.when(F.col("status") == s, F.col("held_s")).otherwise(0.0)).alias(f"seconds_{s}")
        for s in STATUSES
    ]
    return held.groupBy(*KEY).agg(*stats)


def _max_lag_chart(samples: DataFrame, bucket_s: int) -> Series:
    """Per group, the largest partition lag in each time bucket."""
    bucketed = samples.withColumn("bucket", F.floor(F.col("ts") / bucket_s) * bucket_s)
    per_group = (
        bucketed.groupBy("group", "bucket").agg(F.max("lag").alias("lag")).orderBy("bucket")
    ).collect()
    xs = sorted({int(r.bucket) for r in per_group})
    index = {x: i for i, x in enumerate(xs)}
    y: dict[str, list[float | None]] = {}
    for r in per_group:
        y.setdefault(r.group, [None] * len(xs))[index[int(r.bucket)]] = float(r.lag)
    return Series(xs, y)
