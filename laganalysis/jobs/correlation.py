"""Lag jumps matched to the cluster events that preceded them.

A jump is a rise of at least ``min_jump`` (default 100) offsets in a partition's lag from one
sample to the next. It is matched to the events in the ``within_s`` seconds (default 60)
before it: a rebalance of the same group, a leader change or under-replication of the same
partition, or any broker going down or up. A jump with no such event is unexplained.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F

from laganalysis.jobs.history import check_input, cluster_events, lag_samples
from laganalysis.jobs.result import JobResult, ParamError, Series, Table
from laganalysis.records import EventKind

KEY = ["group", "topic", "partition"]
JUMP_COLUMNS = (*KEY, "ts", "jump", "event_kind", "event_ts", "event_broker")
KIND_COLUMNS = ("event_kind", "jumps")


def check(params: Mapping[str, Any]) -> None:
    check_input(params)
    check_input(params, "events_path")
    _settings(params)


def _settings(params: Mapping[str, Any]) -> tuple[int, float]:
    try:
        min_jump, within = int(params.get("min_jump", 100)), float(params.get("within_s", 60))
    except (TypeError, ValueError) as exc:
        raise ParamError(f"min_jump and within_s must be numbers: {exc}") from exc
    if min_jump < 1 or within <= 0:
        raise ParamError("min_jump must be at least 1 and within_s positive")
    return min_jump, within


def run(spark: SparkSession, params: Mapping[str, Any]) -> JobResult:
    min_jump, within = _settings(params)
    order = Window.partitionBy(*KEY).orderBy("ts")
    jumps = (
        lag_samples(spark, params)
        .withColumn("jump", F.col("lag") - F.lag("lag").over(order))
        .where(F.col("jump") >= min_jump)
        .select(*KEY, "ts", "jump")
        .alias("j")
    )
    events = cluster_events(spark, params).alias("e")
    related = (
        ((F.col("e.kind") == EventKind.REBALANCE.value) & (F.col("e.group") == F.col("j.group")))
        | (
            F.col("e.kind").isin(EventKind.LEADER_CHANGE.value, EventKind.UNDER_REPLICATED.value)
            & (F.col("e.topic") == F.col("j.topic"))
            & (F.col("e.partition") == F.col("j.partition"))
        )
        | F.col("e.kind").isin(EventKind.BROKER_DOWN.value, EventKind.BROKER_UP.value)
    )
    in_time = (F.col("e.ts") <= F.col("j.ts")) & (F.col("e.ts") >= F.col("j.ts") - within)
    matched = jumps.join(events, related & in_time, "left").select(
        *[F.col(f"j.{c}").alias(c) for c in (*KEY, "ts", "jump")],
        F.col("e.kind").alias("event_kind"),
        F.col("e.ts").alias("event_ts"),
        F.col("e.broker").alias("event_broker"),
    )
    rows = matched.orderBy(*KEY, "ts", "event_ts").collect()
    by_kind = (
        matched.groupBy(F.coalesce("event_kind", F.lit("unexplained")).alias("event_kind"))
        .agg(F.countDistinct(*KEY, "ts").alias("jumps"))
        .orderBy("event_kind")
        .collect()
    )
    result = JobResult("correlation")
    result.tables["jumps"] = Table.of(JUMP_COLUMNS, [r.asDict() for r in rows])
    result.tables["by_event_kind"] = Table.of(KIND_COLUMNS, [r.asDict() for r in by_kind])
    result.charts["jumps_by_event_kind"] = Series(
        [r.event_kind for r in by_kind], {"jumps": [float(r.jumps) for r in by_kind]})
    return result
