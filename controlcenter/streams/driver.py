"""One persistent query's Spark driver: `python -m controlcenter.streams.driver [SPEC_JSON]`
(the spec's JSON on stdin without the argument, as the supervisor gives it).

Started by the query's Celery task (`controlcenter/streams/supervise.py`) in its own process
group, so the worker never holds a JVM. It analyses the query again (the topics may have
changed since it was validated), starts it as a Structured Streaming query into the output
topic through the `millrace-kafka` sink with exactly-once transactions, checkpointed under the
data dir, and then speaks JSON lines on stdout:

    {"event": "started", "id": "<Spark's query id>", "run_id": "..."}
    {"event": "progress", "batch_id": 3, "input_rows_per_second": ..., ...}   (each new one)
    {"event": "error", "message": "<Spark's message>"}                        (then exit 1)

SIGTERM stops the query between batches and exits 0. Django-free.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
from typing import Any

from controlcenter.streams import views

POLL_SECONDS = 0.5
SHUFFLE_PARTITIONS = 2


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}, default=str), flush=True)


def start(spark: Any, spec: dict[str, Any]) -> Any:
    """The running StreamingQuery of `spec` (the fields `supervise.driver_spec` writes)."""
    source = views.Source(spec["bootstrap"], spec.get("registry_url", ""),
                          spec.get("kafka_config") or {}, spec.get("registry_config") or {})
    if spec.get("kind") == "lag-anomaly":
        frame = lag_anomaly_frame(spark, spec, source)
    else:
        frame, _ = views.analyse(spark, spec["sql"], spec["topics"], source, streaming=True)
    views.check_streaming(frame, spec["output_mode"])
    views.check_output(frame, spec["key_column"])
    writer = (views.sink_frame(frame, spec["key_column"], spec["value_format"],
                               source.registry(), spec["output_topic"])
              .writeStream.format("millrace-kafka").options(**source.options())
              .option("topic", spec["output_topic"])
              .option("deliveryGuarantee", "exactly-once")
              .option("checkpointLocation", spec["checkpoint"])
              .outputMode(spec["output_mode"])
              .queryName(spec["name"])
              .trigger(processingTime=f"{spec.get('trigger_seconds', 1)} seconds"))
    return writer.start()


def lag_anomaly_frame(spark: Any, spec: dict[str, Any], source: views.Source) -> Any:
    """The built-in lag-anomaly query (laganalysis/alertstream.py): the collector's lag
    history from its start (the baselines warm up on it), alerts as `key`/`value`."""
    from laganalysis import alertstream, lagbaseline
    from laganalysis.records import LAG_SAMPLES_TOPIC

    try:
        rule = lagbaseline.Rule.parse(spec.get("params") or {})
    except lagbaseline.RuleError as exc:
        raise views.QueryError(f"Invalid lag-anomaly rule: {exc}") from exc
    samples = (spark.readStream.format("millrace-kafka").options(**source.options())
               .option("subscribe", LAG_SAMPLES_TOPIC).option("startingOffsets", "earliest")
               .load())
    return alertstream.alerts(samples, rule)


def summary(progress: dict[str, Any], lag: int | None) -> dict[str, Any]:
    """The figures the page charts, from one StreamingQueryProgress."""
    state_rows = sum(int(op.get("numRowsTotal") or 0)
                     for op in progress.get("stateOperators") or [])
    return {
        "batch_id": progress.get("batchId"),
        "timestamp": progress.get("timestamp"),
        "num_input_rows": progress.get("numInputRows"),
        "input_rows_per_second": progress.get("inputRowsPerSecond"),
        "processed_rows_per_second": progress.get("processedRowsPerSecond"),
        "batch_duration_ms": (progress.get("durationMs") or {}).get("triggerExecution"),
        "watermark": (progress.get("eventTime") or {}).get("watermark"),
        "state_rows": state_rows,
        "lag": lag,
    }


def end_offsets(progress: dict[str, Any]) -> dict[str, dict[str, int]]:
    """{topic: {partition: next offset}} the last batch read up to, over every source."""
    ends: dict[str, dict[str, int]] = {}
    for source in progress.get("sources") or []:
        offset = source.get("endOffset")
        if isinstance(offset, str):
            try:
                offset = json.loads(offset)
            except ValueError:
                continue
        for topic, partitions in (offset or {}).items():
            if isinstance(partitions, dict):
                ends.setdefault(topic, {}).update({str(p): int(o) for p, o in partitions.items()})
    return ends


class LagMeter:
    """Records behind the source topics: log end offsets minus where the query is."""

    def __init__(self, spec: dict[str, Any]) -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer({"bootstrap.servers": spec["bootstrap"],
                                  "group.id": "millrace-streams-lag",
                                  **(spec.get("kafka_config") or {})})

    def lag(self, progress: dict[str, Any]) -> int | None:
        from confluent_kafka import KafkaException, TopicPartition

        total = 0
        try:
            for topic, partitions in end_offsets(progress).items():
                for partition, offset in partitions.items():
                    _, high = self.consumer.get_watermark_offsets(
                        TopicPartition(topic, int(partition)), timeout=5, cached=False)
                    total += max(0, high - offset)
        except KafkaException:
            return None
        return total


def watch(query: Any, meter: LagMeter, stopping: list[bool]) -> int:
    """Report each new progress until the query ends; the exit code."""
    seen = None
    while query.isActive:
        progress = query.lastProgress
        if progress and progress.get("timestamp") != seen:
            seen = progress.get("timestamp")
            emit("progress", **summary(progress, meter.lag(progress)))
        if stopping:
            query.stop()
            return 0
        time.sleep(POLL_SECONDS)
    error = query.exception()
    if error is not None:
        emit("error", message=views.spark_message(error))
        return 1
    return 0


def main(spec: dict[str, Any]) -> int:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from laganalysis.session import configure
    from sparkkafka.datasource import register

    stopping: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    builder = configure(SparkSession.builder, spec.get("master") or "local[2]",
                        f"millrace-stream-{spec['name']}")
    # A stateful query keeps this many state partitions for its life (in its checkpoint);
    # every batch runs a task per partition, so few, for one machine's driver.
    builder = builder.config("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
    spark = builder.getOrCreate()
    register(spark)
    try:
        query = start(spark, spec)
    except views.QueryError as exc:
        emit("error", message=str(exc))
        return 1
    except Exception as exc:  # noqa: BLE001 - the process's outermost loop: say why, in Spark's words
        emit("error", message=views.spark_message(exc))
        return 1
    emit("started", id=str(query.id), run_id=str(query.runId))
    return watch(query, LagMeter(spec), stopping)


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    # the spec: its JSON on stdin (supervise.Driver), or as the one argument
    sys.exit(main(json.loads(sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read())))
