"""Where the jobs' inputs come from: the history topics over Kafka, or JSON-lines files.

Params (all jobs): ``bootstrap`` (read ``_millrace-lag-samples`` / ``_millrace-cluster-events``
through the millrace-kafka source) or ``samples_path`` / ``events_path`` (files of the same JSON
values, one per line); ``since`` and ``until`` (epoch seconds) bound the window; ``groups``
(a list) narrows it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from laganalysis.jobs.result import ParamError
from laganalysis.records import (
    CLUSTER_EVENT_DDL,
    CLUSTER_EVENTS_TOPIC,
    LAG_SAMPLE_DDL,
    LAG_SAMPLES_TOPIC,
)
from sparkkafka.datasource import FORMAT, register


def lag_samples(spark: SparkSession, params: Mapping[str, Any]) -> DataFrame:
    """Lag samples in the window: group, topic, partition, ts (seconds), offsets, lag, status."""
    df = _records(spark, params, "samples_path", LAG_SAMPLES_TOPIC, LAG_SAMPLE_DDL)
    df = df.withColumn("ts", F.col("ts") / 1000.0)
    df = _window(df, params)
    groups = _groups(params)
    if groups:
        df = df.where(F.col("group").isin(groups))
    return df


def cluster_events(spark: SparkSession, params: Mapping[str, Any]) -> DataFrame:
    df = _records(spark, params, "events_path", CLUSTER_EVENTS_TOPIC, CLUSTER_EVENT_DDL)
    return _window(df.withColumn("ts", F.col("ts") / 1000.0), params)


def check_input(params: Mapping[str, Any], path_key: str = "samples_path") -> None:
    """What every history job checks before Spark starts: a source, a window, a group list."""
    if not (params.get(path_key) or params.get("bootstrap")):
        topic = LAG_SAMPLES_TOPIC if path_key == "samples_path" else CLUSTER_EVENTS_TOPIC
        raise ParamError(f"give bootstrap (the cluster holding {topic}) or {path_key}")
    window_bounds(params)
    _groups(params)


def _groups(params: Mapping[str, Any]) -> list[str]:
    groups = params.get("groups")
    if groups is None:
        return []
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise ParamError(f"groups must be a list of group names, got {groups!r}")
    return groups


def window_bounds(params: Mapping[str, Any]) -> tuple[float | None, float | None]:
    since, until = (_seconds(params, k) for k in ("since", "until"))
    if since is not None and until is not None and since >= until:
        raise ParamError(f"since ({since}) must be before until ({until})")
    return since, until


def kafka_reader(spark: SparkSession, params: Mapping[str, Any]) -> Any:
    """The source reading params' ``bootstrap``, with the librdkafka keys of the optional
    ``kafka_config`` (a secured cluster's login: the platform's KAFKA_CLIENT_CONFIG)."""
    register_once(spark)
    reader = spark.read.format(FORMAT).option("kafka.bootstrap.servers", str(params["bootstrap"]))
    for key, value in dict(params.get("kafka_config") or {}).items():
        reader = reader.option(f"kafka.{key}", str(value))
    return reader


def register_once(spark: SparkSession) -> None:
    try:
        register(spark)
    except Exception as exc:  # already registered in this session
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(exc):
            raise


def _records(
    spark: SparkSession, params: Mapping[str, Any], path_key: str, topic: str, ddl: str
) -> DataFrame:
    if params.get(path_key):
        text = spark.read.text(str(params[path_key]))
    elif params.get("bootstrap"):
        text = kafka_reader(spark, params).option("subscribe", topic).load()
        text = text.select(F.col("value").cast("string").alias("value"))
    else:
        raise ParamError(f"give bootstrap (the cluster holding {topic}) or {path_key}")
    parsed = text.select(F.from_json(F.col("value"), ddl).alias("r")).select("r.*")
    return parsed.where(F.col("v") == 1)


def _window(df: DataFrame, params: Mapping[str, Any]) -> DataFrame:
    since, until = window_bounds(params)
    if since is not None:
        df = df.where(F.col("ts") >= since)
    if until is not None:
        df = df.where(F.col("ts") < until)
    return df


def _seconds(params: Mapping[str, Any], key: str) -> float | None:
    value = params.get(key)
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError) as exc:
        raise ParamError(f"{key} must be epoch seconds, got {value!r}") from exc
