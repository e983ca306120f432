"""The ``millrace-kafka`` Python Data Source: Spark's Kafka connector for any Kafka cluster.

One class gives Spark all four sides: ``reader`` (``spark.read``, ``source.py``),
``streamReader`` (``spark.readStream``, ``stream.py``), ``writer`` and ``streamWriter``
(``df.write`` / ``writeStream``, ``sink.py``). Spark reserves the name ``kafka`` for its Maven
connector, hence the prefix (README: switching a ``format("kafka")`` job).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructField, StructType

from sparkkafka.options import parse_options, parse_sink_options, parse_stream_options
from sparkkafka.sink import KafkaBatchWriter, KafkaStreamWriter
from sparkkafka.source import COLUMNS, HEADERS, KafkaReader, registry_decoders
from sparkkafka.stream import KafkaStreamReader

FORMAT = "millrace-kafka"


class KafkaDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        opts = parse_options(self.options)
        decoded = {column: d.kind for column, d in registry_decoders(opts).items()}
        fields = [
            StructField(f.name, decoded.get(f.name, f.dataType), f.nullable)
            for f in (*COLUMNS, *([HEADERS] if opts.include_headers else []))
        ]
        return StructType(fields)

    def reader(self, schema: StructType) -> KafkaReader:
        opts = parse_options(self.options)
        return KafkaReader(opts, registry_decoders(opts))

    def streamReader(self, schema: StructType) -> KafkaStreamReader:
        opts = parse_stream_options(self.options)
        return KafkaStreamReader(opts, registry_decoders(opts))

    def writer(self, schema: StructType, overwrite: bool) -> KafkaBatchWriter:
        return KafkaBatchWriter(parse_sink_options(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> KafkaStreamWriter:
        return KafkaStreamWriter(parse_sink_options(self.options), schema)


def register(spark: Any) -> None:
    """Make ``format("millrace-kafka")`` available in this session (read, write, streams)."""
    spark.dataSource.register(KafkaDataSource)
