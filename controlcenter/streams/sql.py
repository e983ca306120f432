"""Validating a persistent query and running an ad-hoc one, in this process's Spark session.

The web process (and `manage.py streams`) holds ONE local Spark session, made on first use
(`session()`; a JVM start is seconds, so only the first validation waits for it) and reused
by every request. Each request works in its own `newSession()`: the SparkContext is shared,
but temporary views are not, so two requests naming the same topic never see each other's
streaming and batch views. Nothing here starts a streaming query: validation analyses the
plan and runs the checks Spark runs when a query starts (views.check_streaming).
"""

from __future__ import annotations

import os
import sys
import threading
import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from controlcenter import connection
from controlcenter.streams import views
from controlcenter.streams.supervise import registry_config
from controlcenter.streams.views import QueryError

_lock = threading.Lock()
_session: list[Any] = []


def session() -> Any:
    """A session of its own over the process's one SparkContext, millrace-kafka registered.

    A clone of the root session, not `newSession()`: Spark 4 refuses to register a Python
    Data Source in a new session once any session registered it (DATA_SOURCE_ALREADY_EXISTS)
    yet does not share the registration, while a clone carries it."""
    with _lock:
        if not _session:
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
            from pyspark.errors import AnalysisException
            from pyspark.sql import SparkSession

            from laganalysis.session import configure
            from sparkkafka.datasource import register

            root = configure(SparkSession.builder, settings.MILLRACE_STREAMS_SQL_MASTER,
                             "millrace-streams-sql").getOrCreate()
            try:
                register(root)
            except AnalysisException as exc:  # a session of this process registered it
                if exc.getCondition() != "DATA_SOURCE_ALREADY_EXISTS":
                    raise
            _session.append(root)
    from pyspark.sql import SparkSession as Session

    root = _session[0]
    return Session(root.sparkContext, root._jsparkSession.cloneSession())


def source() -> views.Source:
    return views.Source(settings.KAFKA_BOOTSTRAP_SERVERS, settings.SCHEMA_REGISTRY_URL,
                        connection.client_config(), registry_config())


def topic_names() -> list[str]:
    return [name for name, topic in connection.cluster().metadata(refresh=True).topics.items()
            if topic.error is None or topic.partitions]


@dataclass(frozen=True)
class Checked:
    topics: list[str]  # what the query reads
    columns: list[str]  # what it gives


def validate(sql: str, output_mode: str, key_column: str, value_format: str) -> Checked:
    """The query as a streaming query would be started, without starting it; QueryError
    in Spark's words when it cannot run."""
    spark = session()
    frame, used = views.analyse(spark, sql, topic_names(), source(), streaming=True)
    if not used:
        raise QueryError("The query reads no topic: name one in FROM (a topic is a view "
                         "named after it).")
    if not frame.isStreaming:
        raise QueryError("The query is not a streaming query.")
    views.check_streaming(frame, output_mode)
    views.check_output(frame, key_column)
    views.sink_frame(frame, key_column, value_format, source().registry(), register=False)
    return Checked(used, list(frame.columns))


@dataclass(frozen=True)
class Rows:
    columns: list[str]
    rows: list[list[Any]]
    truncated: bool  # more rows than the limit


def run_adhoc(sql: str, limit: int, timeout_s: float) -> Rows:
    """A bounded batch query over the topics as they are now (like ksqlDB's pull queries):
    at most `limit` rows, cancelled after `timeout_s` (QueryError saying so)."""
    spark = session()
    frame, _ = views.analyse(spark, sql, topic_names(), source(), streaming=False)
    tag = f"millrace-adhoc-{uuid.uuid4().hex[:12]}"
    result: list[Any] = []

    def collect() -> None:
        spark.addTag(tag)
        try:
            result.append(frame.limit(limit + 1).collect())
        except Exception as exc:  # noqa: BLE001 - handed to the caller's thread, raised there
            result.append(exc)
        finally:
            spark.removeTag(tag)

    worker = threading.Thread(target=collect, daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        spark.interruptTag(tag)
        worker.join(30)
        raise QueryError(f"The query did not finish within {timeout_s:g} s and was cancelled.")
    if isinstance(result[0], Exception):
        raise QueryError(views.spark_message(result[0])) from result[0]
    rows = result[0]
    return Rows(list(frame.columns), [[_cell(v) for v in row] for row in rows[:limit]],
                len(rows) > limit)


def _cell(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    if hasattr(value, "asDict"):
        return {k: _cell(v) for k, v in value.asDict().items()}
    if isinstance(value, list):
        return [_cell(v) for v in value]
    if isinstance(value, int | float | str | bool) or value is None:
        return value
    return str(value)
