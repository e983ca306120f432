"""A Spark driver for the exactly-once test: copies a topic into another through the
``millrace-kafka`` source and its exactly-once sink, checkpointed. The test SIGKILLs it mid-batch
and starts it again on the same checkpoint.

    python -m tests.sparkkafka.pipe_query BOOTSTRAP SOURCE SINK CHECKPOINT \
        (forever|available-now) RECORDS_PER_BATCH
"""

from __future__ import annotations

import os
import sys


def main(
    bootstrap: str, source: str, sink: str, checkpoint: str, mode: str, batch: str = "800"
) -> None:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from laganalysis.session import configure
    from sparkkafka.datasource import register

    spark = configure(SparkSession.builder, "local[2]", "millrace-eos-test").getOrCreate()
    register(spark)
    writer = (
        spark.readStream.format("millrace-kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("maxOffsetsPerTrigger", batch)
        .load()
        .selectExpr("key", "value")
        .writeStream.format("millrace-kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("deliveryGuarantee", os.environ.get("SINK_GUARANTEE", "exactly-once"))
        .option("checkpointLocation", checkpoint)
    )
    if mode == "available-now":
        writer = writer.trigger(availableNow=True)
    query = writer.start()
    query.awaitTermination()
    for progress in query.recentProgress:  # for the test's failure message
        print("batch", progress["batchId"], progress["durationMs"], flush=True)
    spark.stop()
    sys.exit(1 if query.exception() else 0)


if __name__ == "__main__":
    main(*sys.argv[1:7])
