"""Hot partitions and key skew from topic data: messages and bytes per partition and per key.

Reads the topics with the millrace-kafka source (params: ``bootstrap``, ``topics``, optional
``since``/``until`` as record timestamps). A partition is hot when it holds at least
``hot_factor`` (default 1.5) times the mean messages of its topic's partitions. The partitions
come from the topic's metadata, so a partition with no record in the window counts (as 0
messages) in the mean, the shares and the skew: a topic whose traffic all goes to 1 of 10
partitions shows that one as hot, with max/mean 10.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from laganalysis.eta import skew
from laganalysis.jobs.history import kafka_reader, window_bounds
from laganalysis.jobs.result import JobResult, ParamError, Series, Table
from sparkkafka.source import topic_partitions

PARTITION_COLUMNS = ("topic", "partition", "messages", "bytes", "share", "hot")
KEY_COLUMNS = ("topic", "key", "messages", "bytes", "share")
TOPIC_COLUMNS = (
    "topic",
    "partitions",
    "messages",
    "bytes",
    "partition_max_over_mean",
    "partition_gini",
    "distinct_keys",
    "top_key_share",
)


def check(params: Mapping[str, Any]) -> None:
    if not params.get("bootstrap"):
        raise ParamError("give bootstrap, the cluster holding the topics")
    window_bounds(params)
    _settings(params)


def run(spark: SparkSession, params: Mapping[str, Any]) -> JobResult:
    check(params)
    topics, hot_factor, top_keys = _settings(params)
    data = _read(spark, params, topics).select(
        "topic",
        "partition",
        F.coalesce(F.col("key").cast("string"), F.lit(None)).alias("key"),
        (F.coalesce(F.length("key"), F.lit(0)) + F.coalesce(F.length("value"), F.lit(0))).alias(
            "size"
        ),
    )
    data.cache()
    counted = (
        data.groupBy("topic", "partition")
        .agg(F.count(F.lit(1)).alias("messages"), F.sum("size").alias("bytes"))
        .collect()
    )
    metadata = topic_partitions({**dict(params.get("kafka_config") or {}),
                                 "bootstrap.servers": str(params["bootstrap"])}, topics)
    partitions = _with_empty_partitions(counted, metadata, hot_factor)
    keys = _top_keys(data, top_keys)
    distinct = {
        r.topic: r.n for r in data.groupBy("topic").agg(F.countDistinct("key").alias("n")).collect()
    }
    data.unpersist()
    result = JobResult("hot_partitions")
    result.tables["partitions"] = Table.of(PARTITION_COLUMNS, [r._asdict() for r in partitions])
    result.tables["keys"] = Table.of(KEY_COLUMNS, keys)
    result.tables["topics"] = Table.of(TOPIC_COLUMNS, _topic_rows(partitions, keys, distinct))
    result.charts["messages_per_partition"] = Series(
        [f"{r.topic}-{r.partition}" for r in partitions],
        {"messages": [float(r.messages) for r in partitions]},
    )
    return result


class PartitionRow(NamedTuple):
    topic: str
    partition: int
    messages: int
    bytes: int
    share: float
    hot: bool


def _with_empty_partitions(
    counted: list[Any], metadata: Mapping[str, list[int]], hot_factor: float
) -> list[PartitionRow]:
    """Every partition of every topic, the ones without a record as zeros; shares and hotness
    against the mean over all of them."""
    found = {(r.topic, r.partition): (int(r.messages), int(r.bytes or 0)) for r in counted}
    rows = []
    for topic in sorted(metadata):
        ids = sorted(set(metadata[topic]) | {p for t, p in found if t == topic})
        total = sum(found.get((topic, p), (0, 0))[0] for p in ids)
        mean = total / len(ids) if ids else 0.0
        for p in ids:
            messages, size = found.get((topic, p), (0, 0))
            share = messages / total if total else 0.0
            hot = messages > 0 and messages >= hot_factor * mean
            rows.append(PartitionRow(topic, p, messages, size, share, hot))
    return rows


def _read(spark: SparkSession, params: Mapping[str, Any], topics: list[str]) -> DataFrame:
    if not params.get("bootstrap"):
        raise ParamError("give bootstrap, the cluster holding the topics")
    reader = kafka_reader(spark, params).option("subscribe", ",".join(topics))
    since, until = window_bounds(params)
    if since is not None:
        # A partition with nothing newer than `since` contributes nothing, not an error.
        reader = reader.option("startingTimestamp", str(int(since * 1000))).option(
            "startingOffsetsByTimestampStrategy", "latest"
        )
    if until is not None:
        reader = reader.option("endingTimestamp", str(int(until * 1000)))
    loaded: DataFrame = reader.load()
    return loaded


def _top_keys(data: DataFrame, limit: int) -> list[dict[str, Any]]:
    per_key = data.groupBy("topic", "key").agg(
        F.count(F.lit(1)).alias("messages"), F.sum("size").alias("bytes")
    )
    ranked = per_key.withColumn(
        "share", F.col("messages") / F.sum("messages").over(Window.partitionBy("topic"))
    ).withColumn(
        "rank",
        F.row_number().over(
            Window.partitionBy("topic").orderBy(F.desc("messages"), F.asc_nulls_last("key"))
        ),
    )
    rows = ranked.where(F.col("rank") <= limit).orderBy("topic", "rank").collect()
    return [r.asDict() for r in rows]


def _topic_rows(
    partitions: list[PartitionRow], keys: list[dict[str, Any]], distinct: dict[str, int]
) -> list[dict[str, Any]]:
    rows = []
    for topic in sorted({r.topic for r in partitions}):
        mine = [r for r in partitions if r.topic == topic]
        spread = skew([float(r.messages) for r in mine])
        top = [k for k in keys if k["topic"] == topic]
        rows.append(
            {
                "topic": topic,
                "partitions": len(mine),
                "messages": sum(r.messages for r in mine),
                "bytes": sum(r.bytes for r in mine),
                "partition_max_over_mean": spread.max_over_mean,
                "partition_gini": spread.gini,
                "distinct_keys": distinct.get(topic, 0),
                "top_key_share": top[0]["share"] if top else None,
            }
        )
    return rows


def _settings(params: Mapping[str, Any]) -> tuple[list[str], float, int]:
    topics = params.get("topics")
    if isinstance(topics, str):
        topics = [t.strip() for t in topics.split(",") if t.strip()]
    if not topics or not all(isinstance(t, str) for t in topics):
        raise ParamError("topics must name at least one topic")
    try:
        factor, limit = float(params.get("hot_factor", 1.5)), int(params.get("top_keys", 20))
    except (TypeError, ValueError) as exc:
        raise ParamError(f"hot_factor and top_keys must be numbers: {exc}") from exc
    if factor <= 0 or limit < 1:
        raise ParamError("hot_factor must be positive and top_keys at least 1")
    return list(topics), factor, limit
