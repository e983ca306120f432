"""Catch-up ETA per partition and group, with skew (max/mean and Gini of lag across partitions).

Spark reduces the history to each partition's first and last sample in the window; the rates,
ETA and skew then come from ``laganalysis.eta``, the same functions the collector uses, so the
job and the live pages agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from laganalysis import eta as rules
from laganalysis.jobs.history import check_input, lag_samples
from laganalysis.jobs.result import JobResult, Series, Table
from laganalysis.window import Sample

KEY = ["group", "topic", "partition"]
PARTITION_COLUMNS = (*KEY, "lag", "consume_rate", "produce_rate", "progress", "eta_seconds")
Etas = dict[str, dict[tuple[str, int], rules.Eta]]  # group -> (topic, partition) -> ETA
GROUP_COLUMNS = (
    "group",
    "total_lag",
    "progress",
    "eta_seconds",
    "slowest_topic",
    "slowest_partition",
    "skew_max_over_mean",
    "skew_gini",
)


def check(params: Mapping[str, Any]) -> None:
    check_input(params)


def run(spark: SparkSession, params: Mapping[str, Any]) -> JobResult:
    ends = (
        lag_samples(spark, params)
        .groupBy(*KEY)
        .agg(
            F.min_by(F.struct("ts", "committed_offset", "end_offset"), "ts").alias("first"),
            F.max_by(F.struct("ts", "committed_offset", "end_offset", "lag"), "ts").alias("last"),
        )
        .collect()
    )
    partitions: Etas = {}
    for r in ends:
        first = Sample(r.first.ts, r.first.committed_offset, r.first.end_offset)
        last = Sample(r.last.ts, r.last.committed_offset, r.last.end_offset)
        window = [first, last] if last.timestamp > first.timestamp else [last]
        partitions.setdefault(r.group, {})[(r.topic, r.partition)] = rules.partition_eta(
            window, r.last.lag
        )
    result = JobResult("eta")
    result.tables["partitions"] = Table.of(PARTITION_COLUMNS, _partition_rows(partitions))
    result.tables["groups"] = Table.of(GROUP_COLUMNS, _group_rows(partitions))
    rows = result.tables["partitions"].rows
    result.charts["lag_by_partition"] = Series(
        [f"{r['group']} {r['topic']}-{r['partition']}" for r in rows],
        {"lag": [float(r["lag"]) for r in rows]})
    return result


def _partition_rows(
    partitions: dict[str, dict[tuple[str, int], rules.Eta]],
) -> list[dict[str, Any]]:
    return [
        {
            "group": group,
            "topic": topic,
            "partition": partition,
            "lag": eta.lag,
            "consume_rate": eta.consume_rate,
            "produce_rate": eta.produce_rate,
            "progress": eta.progress.value,
            "eta_seconds": eta.seconds,
        }
        for group, parts in sorted(partitions.items())
        for (topic, partition), eta in sorted(parts.items())
    ]


def _group_rows(partitions: Etas) -> list[dict[str, Any]]:
    rows = []
    for group, parts in sorted(partitions.items()):
        g = rules.group_eta(parts)
        slowest = g.slowest_partition or (None, None)
        rows.append(
            {
                "group": group,
                "total_lag": g.total_lag,
                "progress": g.progress.value,
                "eta_seconds": g.seconds,
                "slowest_topic": slowest[0],
                "slowest_partition": slowest[1],
                "skew_max_over_mean": g.skew.max_over_mean,
                "skew_gini": g.skew.gini,
            }
        )
    return rows
