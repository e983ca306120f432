"""Lag summary per group/topic/partition over a window: offsets and seconds min/avg/p95/max, and
the seconds spent in each Burrow status (each sample holds until the next one).

Where the time goes (bench/README.md has the profile): one shuffle by partition and a sort by
time within it, which the held seconds need. The exact p95 is taken from each partition's
sorted values (``_p95``) rather than Spark's ``percentile``, whose per-value hash map of boxed
counts and final sort took 40% of the job's CPU at 10M rows; the status is compared as a small
integer code, not six string comparisons a row."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
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
    narrow = samples.select(*KEY, "ts", "lag", "lag_seconds", _status_code().alias("code"))
    held = narrow.withColumn(
        "held_s", F.coalesce(F.lead("ts").over(following) - F.col("ts"), F.lit(0.0))
    )
    stats = [F.count(F.lit(1)).alias("samples")]
    for col, name in (("lag", "lag"), ("lag_seconds", "lag_seconds")):
        stats += [
            F.min(col).alias(f"{name}_min"),
            F.avg(col).alias(f"{name}_avg"),
            _p95(col).alias(f"{name}_p95"),
            F.max(col).alias(f"{name}_max"),
        ]
    stats += [
        F.sum(F.when(F.col("code") == i, F.col("held_s")).otherwise(0.0)).alias(f"seconds_{s}")
        for i, s in enumerate(STATUSES)
    ]
    return held.groupBy(*KEY).agg(*stats)


def _status_code() -> Column:
    """The status as its index in STATUSES (null for any other), compared once per row."""
    code = F.lit(None).cast("byte")
    for i, name in reversed(list(enumerate(STATUSES))):
        code = F.when(F.col("status") == name, F.lit(i).cast("byte")).otherwise(code)
    return code


def _p95(col: str) -> Column:
    """Spark's exact ``percentile(col, 0.95)``: linear between the two values around rank
    0.95 * (n - 1), as ``lower + (pos - floor) * (upper - lower)``, from the sorted values."""
    values = F.sort_array(F.collect_list(col))
    pos = (F.size(values) - 1).cast("double") * 0.95
    lo, hi = F.floor(pos), F.ceil(pos)
    # get() is 0-based and null out of range: no values (all null) gives null, as percentile.
    lower = F.get(values, lo.cast("int")).cast("double")
    upper = F.get(values, hi.cast("int")).cast("double")
    interpolated = lower + (pos - lo) * (upper - lower)
    return F.when((hi == lo) | (lower == upper), lower).otherwise(interpolated)


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
