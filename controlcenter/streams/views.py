"""Topics as Spark SQL views, and what a query's SQL may be (Django-free: the query's driver
process imports this module too).

A query names topics as tables: `SELECT ... FROM orders`. Each topic is a temporary view
named after it (`topic_view_name`: characters SQL cannot spell bare become `_`), with Spark's
Kafka columns (`key value topic partition offset timestamp timestampType`) and, when the
topic's value subject (`<topic>-value`) is in the registry in a format sparkkafka decodes,
the decoded value's fields as columns beside them (`decoded_columns`, the one place a new
format slots in). Views are registered on demand: the SQL is analysed, and every table Spark
cannot find that is a topic becomes a view, until Spark finds everything or names a table
that is no topic (its TABLE_OR_VIEW_NOT_FOUND is the user's error, in Spark's words).

Streaming views read from the earliest offset (a new persistent query processes the topic
from the start; a restarted one resumes from its checkpoint); batch views read everything up
to the latest offset when the query runs.

A topic is also a *table*, `<view>_table` (ksqlDB's CREATE TABLE over a compacted topic): a
batch view holding the latest record of each key (by offset; a null value, a tombstone,
deletes the key), the same columns as the topic's view. In a streaming query it is the static
side of a stream-table join, and each micro-batch joins against the table as it is then, as in
ksqlDB: Spark plans a Python data source's batch partitions (the offset ranges) once per query,
but runs their tasks again in every micro-batch, so the table view reads with sparkkafka's
`endingOffsetsAtRead` (each partition read to its latest offset when the task runs). A table
update reaches the stream records of the next micro-batch, without a restart. The partitions
are those the topic had when the query started. A topic literally named like a table view is
read as that topic.
"""

from __future__ import annotations

import logging
import re
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

KAFKA_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")
OUTPUT_MODES = ("append", "update")
MAX_VIEWS = 32  # a statement naming more unknown tables than this is not worth resolving
TABLE_SUFFIX = "_table"
# The temp views this module registered in each Spark session. Each analysis starts without
# them: a session outlives its queries (the server's, for validation and ad-hoc queries), and
# a view left from an earlier one would be read as it was then (a table's offsets, a topic
# read as a stream where a batch is wanted).
_registered: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()


class QueryError(ValueError):
    """The SQL cannot run: Spark's own message (error class first)."""


@dataclass(frozen=True)
class Source:
    """How views reach the cluster and the registry. `registry_config`: Confluent's
    registry client keys besides the URL (`basic.auth.user.info`, `ssl.ca.location`: a
    registry behind HTTP Basic and HTTPS, as under `platform --secure`)."""

    bootstrap: str
    registry_url: str = ""
    kafka_config: Mapping[str, str] = field(default_factory=dict)  # librdkafka keys
    registry_config: Mapping[str, str] = field(default_factory=dict)

    def options(self) -> dict[str, str]:
        return {"kafka.bootstrap.servers": self.bootstrap,
                **{f"kafka.{k}": str(v) for k, v in self.kafka_config.items()}}

    def registry(self) -> dict[str, str]:
        """Confluent's registry client config (sparkkafka's helpers take it as their
        `registry_url`); {} without a registry."""
        if not self.registry_url:
            return {}
        return {**self.registry_config, "url": self.registry_url}


def topic_view_name(topic: str) -> str:
    name = re.sub(r"[^0-9A-Za-z_]", "_", topic)
    return f"_{name}" if name[:1].isdigit() else name


def view_names(topics: Iterable[str]) -> dict[str, str]:
    """View name (lower case: Spark's names are case-insensitive) -> topic. Two topics that
    sanitise to the same name: the first in sorted order gets it."""
    names: dict[str, str] = {}
    for topic in sorted(topics):
        names.setdefault(topic_view_name(topic).lower(), topic)
    return names


def register_topic_view(spark: Any, topic: str, source: Source, streaming: bool) -> None:
    """The topic's view, streaming or batch, with decoded columns when its subject has a
    schema (`decoded_columns`)."""
    reader = spark.readStream if streaming else spark.read
    reader = reader.format("millrace-kafka").options(**source.options())
    frame = reader.option("subscribe", topic).option("startingOffsets", "earliest").load()
    frame = decoded_columns(frame, topic, source.registry())
    _register(spark, frame, topic_view_name(topic))


def register_table_view(spark: Any, topic: str, source: Source) -> None:
    """`<view>_table`: the topic's latest record per key, tombstones deleting (batch), up to
    the latest offset when each read runs (a stream-table join's every micro-batch)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    frame = (spark.read.format("millrace-kafka").options(**source.options())
             .option("subscribe", topic).option("endingOffsetsAtRead", "true").load())
    latest = Window.partitionBy("key").orderBy(F.col("offset").desc(),
                                               F.col("partition").desc())
    frame = (frame.where(F.col("key").isNotNull())
             .withColumn("__latest", F.row_number().over(latest))
             .where((F.col("__latest") == 1) & F.col("value").isNotNull()).drop("__latest"))
    frame = decoded_columns(frame, topic, source.registry())
    _register(spark, frame, topic_view_name(topic) + TABLE_SUFFIX)


def _register(spark: Any, frame: Any, name: str) -> None:
    frame.createOrReplaceTempView(name)
    _registered.setdefault(spark, set()).add(name)


def _forget_views(spark: Any) -> None:
    for name in _registered.pop(spark, set()):
        spark.catalog.dropTempView(name)


def decoded_columns(frame: Any, topic: str, registry: Mapping[str, str]) -> Any:
    """`frame` with the value decoded into columns when `<topic>-value` has a schema (Avro,
    JSON Schema or Protobuf: sparkkafka's decoders); otherwise unchanged. Fields named like a
    Kafka column get a `value_` prefix. `registry`: `Source.registry()`."""
    if not registry:
        return frame
    schema_type = latest_schema_type(registry, f"{topic}-value")
    if schema_type not in ("AVRO", "JSON", "PROTOBUF"):
        return frame
    from pyspark.sql import functions as F

    from sparkkafka.formats import decode_column

    decoded = frame.withColumn("__decoded", decode_column(
        "value", f"{topic}-value", registry, expected_type=schema_type))
    value_type = decoded.schema["__decoded"].dataType
    if type(value_type).__name__ != "StructType":
        return decoded.withColumnRenamed("__decoded", "value_decoded")
    fields = [F.col(f"__decoded.`{f.name}`").alias(
        f"value_{f.name}" if f.name in KAFKA_COLUMNS else f.name) for f in value_type.fields]
    return decoded.select(*[F.col(c) for c in frame.columns], *fields)


def latest_schema_type(registry: Mapping[str, str], subject: str) -> str | None:
    """AVRO, JSON or PROTOBUF for the subject's latest version; None when it has none.
    `registry`: Confluent's client config (`Source.registry()`), its login and CA used."""
    import httpx

    from sparkkafka.schema_registry import Registry, SchemaError

    try:
        access = Registry.from_config(registry)
        response = httpx.get(f"{access.url.rstrip('/')}/subjects/{subject}/versions/latest",
                             auth=access.auth(), verify=access.verify(), timeout=10)
    except (httpx.HTTPError, SchemaError) as exc:
        log.warning("registry %s unreachable for %s: %s", registry.get("url"), subject, exc)
        return None
    if response.status_code in (401, 403):
        # a refused login is the platform's misconfiguration, not a topic without schema
        log.warning("registry %s refused %s: HTTP %s %s", registry.get("url"), subject,
                    response.status_code, response.text)
    if response.status_code != 200:
        return None
    return str(response.json().get("schemaType") or "AVRO")


def analyse(spark: Any, sql: str, topics: Iterable[str], source: Source,
            streaming: bool) -> tuple[Any, list[str]]:  # fmt: skip
    """The query's DataFrame (analysed, not run) and the topics it reads. Raises QueryError
    with Spark's message for a syntax error or a table that is no topic."""
    from pyspark.errors import AnalysisException, ParseException

    # pyspark logs every analysis error at ERROR with the JVM's stack; here they are answers.
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    _forget_views(spark)
    known = view_names(topics)
    used: list[str] = []
    resolved: set[tuple[str, bool]] = set()
    for _ in range(MAX_VIEWS):
        try:
            return spark.sql(sql), used
        except ParseException as exc:
            raise QueryError(spark_message(exc)) from exc
        except AnalysisException as exc:
            topic, table = _missing_topic(exc, known)
            if topic is None or (topic, table) in resolved:
                raise QueryError(spark_message(exc)) from exc
            if table:
                register_table_view(spark, topic, source)
            else:
                register_topic_view(spark, topic, source, streaming)
            resolved.add((topic, table))
            if topic not in used:
                used.append(topic)
    raise QueryError(f"The query names more than {MAX_VIEWS} topics.")


def _missing_topic(exc: Any, known: Mapping[str, str]) -> tuple[str | None, bool]:
    """The topic a missing relation names, and whether as its table view."""
    if exc.getCondition() != "TABLE_OR_VIEW_NOT_FOUND":
        return None, False
    name = (exc.getMessageParameters() or {}).get("relationName", "")
    parts = [p.strip("`") for p in name.split("`.`")]
    if len(parts) != 1:
        return None, False
    view = parts[0].lower()
    if view in known or not view.endswith(TABLE_SUFFIX):
        return known.get(view), False
    return known.get(view.removesuffix(TABLE_SUFFIX)), True


def check_streaming(frame: Any, output_mode: str) -> None:
    """What Spark checks when a streaming query starts (UnsupportedOperationChecker: an
    aggregation without a watermark in append mode, ...), without starting it."""
    from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]
    from pyspark.errors import AnalysisException

    jvm = frame.sparkSession._jvm
    plan = frame._jdf.queryExecution().analyzed()
    mode = jvm.org.apache.spark.sql.catalyst.streaming.InternalOutputModes.apply(output_mode)
    try:
        jvm.org.apache.spark.sql.catalyst.analysis.UnsupportedOperationChecker.checkForStreaming(
            plan, mode)
    except AnalysisException as exc:  # what pyspark makes of Spark's own errors
        raise QueryError(spark_message(exc)) from exc
    except Py4JJavaError as exc:
        raise QueryError(str(exc.java_exception.getMessage())) from exc


def check_output(frame: Any, key_column: str) -> None:
    if key_column and key_column not in frame.columns:
        raise QueryError(f"[UNRESOLVED_COLUMN] The key column `{key_column}` is not one of the "
                         f"query's columns: {', '.join(frame.columns)}.")


# The registry's schema type of each output format that writes through the registry (the
# ValueFormat values; this module stays importable without Django: the driver imports it).
REGISTRY_FORMATS = {"avro": "AVRO", "jsonschema": "JSON", "protobuf": "PROTOBUF"}


def sink_frame(frame: Any, key_column: str, value_format: str,
               registry: Mapping[str, str] | str = "", output_topic: str = "",
               register: bool = True) -> Any:
    """The query's rows as the sink's `key`/`value` columns: the value is the row as JSON
    (`json`), the query's own `value` column (`raw`: STRING or BINARY), or the row in the
    Confluent wire format (`avro`, `jsonschema`, `protobuf`) with a schema derived from the
    row's type, registered as `<output topic>-value` (only checked when not `register`).
    `registry`: its URL or Confluent's client config (`Source.registry()`)."""
    from pyspark.sql import functions as F

    row = F.struct(*[F.col(f"`{c}`") for c in frame.columns])
    if value_format == "raw":
        if "value" not in frame.columns:
            raise QueryError("[UNRESOLVED_COLUMN] The raw format writes the query's `value` "
                             f"column; the query has {', '.join(frame.columns)}.")
        value = F.col("value")
    elif value_format in REGISTRY_FORMATS:
        value = registry_value(frame, row, REGISTRY_FORMATS[value_format], registry,
                               output_topic, register)
    else:
        value = F.to_json(row)
    columns = [value.alias("value")]
    if key_column:
        columns.append(F.col(f"`{key_column}`").cast("string").alias("key"))
    return frame.select(*columns)


def registry_value(frame: Any, row: Any, schema_type: str,
                   registry: Mapping[str, str] | str, output_topic: str,
                   register: bool) -> Any:
    """`row` encoded through the registry, or, when not `register`, only the check that it
    can be: a registry is configured and the row's type has a schema in the format."""
    from sparkkafka.formats import encode_column, schema_for
    from sparkkafka.schema_registry import SchemaError

    if not registry:
        raise QueryError(f"The {schema_type} output format needs the schema registry, and "
                         "none is configured (SCHEMA_REGISTRY_URL).")
    kind = frame.select(row.alias("row")).schema["row"].dataType
    try:
        schema = schema_for(schema_type, kind, "Value")
        if not register:
            return row
        return encode_column(row, f"{output_topic}-value", registry, schema_type,
                             schema=schema)
    except SchemaError as exc:
        raise QueryError(f"The row cannot be written as {schema_type}: {exc}") from exc


def spark_message(exc: BaseException) -> str:
    """Spark's message without the JVM stack trace pyspark appends."""
    text = str(getattr(exc, "_desc", None) or exc)
    return text.split("\n\nJVM stacktrace:")[0].strip()
