"""Issue 21's streams, proven the way users meet them: persistent queries created through the
JSON API (and from the page in Chromium: `test_streams_pages.py`, which shares this module's
worker fixture and waits), run by a real Celery worker as Spark Structured Streaming queries
on the session broker, read back with a read_committed consumer.

Validation, ad-hoc queries and the joins run in the process's one Spark session, the tests'
local one (`spark`): JVM starts dominate, so the tests share it.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import override_settings

from controlcenter.access import Capability
from controlcenter.streams.models import StreamQuery, StreamState
from tests.controlcenter.analysis.analysis_worker import _celery, purge_queue
from tests.controlcenter.conftest import PASSWORD, make_user
from tests.laganalysis.conftest import spark
from tests.sparkkafka.topics import create_topic, produce

__all__ = ["spark"]
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

QUEUE = f"streams-test-{uuid.uuid4().hex[:8]}"
SPARK_WAIT_S = 600  # a driver's JVM start and first batch on a machine shared with others
# Windows start here: a multiple of 10 s, two minutes ago (record timestamps far in the past
# would be deleted by the broker's time retention before the query reads them).
BASE_MS = (int(time.time()) // 10 - 12) * 10_000
WINDOWED_SQL = """
SELECT window.start AS window_start, CAST(key AS STRING) AS k, count(*) AS n
FROM {topic} WATERMARK timestamp DELAY OF INTERVAL 5 SECONDS
GROUP BY window(timestamp, '10 seconds'), CAST(key AS STRING)"""

@pytest.fixture(scope="module")
def overrides(kafka_bootstrap: str) -> dict[str, Any]:
    # No registry here: topics without a schema are read as Kafka's columns.
    return {"KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, "MILLRACE_STREAMS_QUEUE": QUEUE,
            "SCHEMA_REGISTRY_URL": ""}


@pytest.fixture(scope="module")
def worker(django_db_setup: None, overrides: dict[str, Any],
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[], Any]]:  # fmt: skip
    """The streams worker on its own queue over the test database; yields a function that
    restarts it (what a platform restart does to it)."""
    logs = Path(os.environ.get("STREAMS_TEST_LOGS") or tmp_path_factory.mktemp("streams-celery"))
    env = {**os.environ,
           "DATABASE_URL": f"sqlite:///{connection.settings_dict['NAME']}",
           "CELERY_BROKER_URL": "filesystem://", "PYSPARK_PYTHON": sys.executable,
           **{k: str(v) for k, v in overrides.items()}}  # fmt: skip
    args = ["worker", "--pool", "threads", "--concurrency", "4", "--queues", QUEUE,
            "--hostname", f"{QUEUE}@%h", "--without-gossip", "--without-mingle"]
    purge_queue(QUEUE)
    with ExitStack() as stack, override_settings(**overrides):
        lives = [0]

        def start() -> None:
            lives[0] += 1
            stack.enter_context(_celery(args, env, logs / f"worker-{lives[0]}.log", " ready."))

        start()

        def restart() -> None:
            stack.close()
            start()

        yield restart


@pytest.fixture
def analyst(overrides: dict[str, Any]) -> Iterator[Client]:
    user = make_user("analyst", Capability.RUN_ANALYSES)
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    with override_settings(**overrides):
        yield client


def wait_until(check: Callable[[], Any], what: str, seconds: float = SPARK_WAIT_S) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def query_row(name: str) -> StreamQuery:
    return StreamQuery.objects.get(name=name)


def running_with_progress(name: str, batches_after: int = -1) -> StreamQuery:
    def check() -> StreamQuery | None:
        q = query_row(name)
        assert q.state != StreamState.FAILED, q.last_error
        batch = int((q.last_progress or {}).get("batch_id") or 0)
        ok = q.state == StreamState.RUNNING and q.progress and batch > batches_after
        return q if ok else None
    query: StreamQuery = wait_until(check, f"{name} running with progress")
    return query


def committed_records(bootstrap: str, topic: str, partitions: int = 1
                      ) -> list[tuple[str, dict[str, Any]]]:  # fmt: skip
    """Every committed record of the topic, read_committed, up to its end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[tuple[str, dict[str, Any]]] = []
    eof: set[int] = set()
    deadline = time.monotonic() + 30
    while len(eof) < partitions and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is None:
            continue
        if message.error():
            eof.add(message.partition())
            continue
        out.append(((message.key() or b"").decode(), json.loads(message.value())))
    consumer.close()
    return out


def records(topic: str, window_s: int, counts: dict[str, int]) -> list[Any]:
    ts = BASE_MS + window_s * 1000
    return [(i % 2, key.encode(), f"{key}-{i}".encode(), ts + i)
            for key, n in counts.items() for i in range(n)]


def create(client: Client, name: str, sql: str, output: str, **extra: Any) -> Any:
    return client.post("/api/v1/streams/queries", {"name": name, "sql": sql,
                       "output_topic": output, **extra}, content_type="application/json")


# --- validation ---------------------------------------------------------------------------------

def test_bad_queries_are_refused_in_sparks_words_before_anything_is_queued(
    analyst: Client, kafka_bootstrap: str, spark: Any
) -> None:
    topic = create_topic(kafka_bootstrap, 1)
    view = topic.replace("-", "_")
    cases = {
        "SELECT * FROM no_such_topic": "TABLE_OR_VIEW_NOT_FOUND",
        f"SELEC key FROM {view}": "PARSE_SYNTAX_ERROR",
        f"SELECT CAST(key AS STRING) k, count(*) n FROM {view} GROUP BY CAST(key AS STRING)":
            "STREAMING_OUTPUT_MODE",
    }
    for sql, condition in cases.items():
        answer = create(analyst, "bad", sql, "out-bad")
        assert answer.status_code == 400, answer.content
        assert answer.json()["error_code"] == "INVALID_QUERY"
        assert condition in answer.json()["message"], answer.json()["message"]
    # The page's form says the same, on the SQL field.
    page = analyst.post("/streams/", {"name": "bad", "sql": f"SELEC key FROM {view}",
                                      "output_topic": "out-bad", "value_format": "json",
                                      "output_mode": "append"})
    assert page.status_code == 400
    assert b"PARSE_SYNTAX_ERROR" in page.content
    # A key column the query does not have, and a query reading its own output.
    answer = create(analyst, "bad", f"SELECT key FROM {view}", "out-bad", key_column="nope")
    assert answer.status_code == 400 and "UNRESOLVED_COLUMN" in answer.json()["message"]
    answer = create(analyst, "bad", f"SELECT value FROM {view}", topic)
    assert answer.status_code == 400 and "its own output" in answer.json()["message"]
    assert not StreamQuery.objects.exists()


def test_ad_hoc_queries_read_the_topics_with_a_limit(
    analyst: Client, kafka_bootstrap: str, spark: Any
) -> None:
    topic = create_topic(kafka_bootstrap, 2)
    produce(kafka_bootstrap, topic, records(topic, 0, {"a": 3, "b": 2}))
    sql = (f"SELECT CAST(key AS STRING) AS k, count(*) AS n FROM {topic.replace('-', '_')} "
           "GROUP BY 1 ORDER BY 1")
    # A generous timeout: the first batch job starts Spark's Python workers.
    answer = analyst.post("/api/v1/streams/adhoc", {"sql": sql, "timeout_s": 240},
                          content_type="application/json")
    assert answer.status_code == 200, answer.content
    assert answer.json() == {"columns": ["k", "n"], "rows": [["a", 3], ["b", 2]],
                             "truncated": False}
    answer = analyst.post("/api/v1/streams/adhoc", {"sql": sql, "limit": 1, "timeout_s": 240},
                          content_type="application/json")
    assert answer.json()["rows"] == [["a", 3]] and answer.json()["truncated"] is True
    answer = analyst.post("/api/v1/streams/adhoc", {"sql": "SELECT * FROM nowhere"},
                          content_type="application/json")
    assert answer.status_code == 400 and "TABLE_OR_VIEW_NOT_FOUND" in answer.json()["message"]


AVRO_ORDER = {"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "amount", "type": "double"},
    {"name": "key", "type": "string"}]}  # named like a Kafka column: value_key in the view


def test_a_topic_with_an_avro_subject_is_a_view_with_its_fields_as_columns(
    analyst: Client, kafka_bootstrap: str, schema_registry: str, spark: Any
) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = create_topic(kafka_bootstrap, 1)
    serialize = AvroSerializer(SchemaRegistryClient({"url": schema_registry}),
                               json.dumps(AVRO_ORDER))
    context = SerializationContext(topic, MessageField.VALUE)
    produce(kafka_bootstrap, topic, [
        (0, b"k", serialize({"id": i, "amount": i * 1.5, "key": f"o{i}"}, context), None)
        for i in (1, 2)])
    sql = f"SELECT id, amount, value_key, CAST(key AS STRING) AS k FROM {topic.replace('-', '_')}"
    with override_settings(SCHEMA_REGISTRY_URL=schema_registry):
        answer = analyst.post("/api/v1/streams/adhoc", {"sql": sql + " ORDER BY id",
                              "timeout_s": 240}, content_type="application/json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["rows"] == [[1, 1.5, "o1", "k"], [2, 3.0, "o2", "k"]]



def test_a_topic_with_a_json_schema_subject_is_a_view_with_typed_columns(
    analyst: Client, kafka_bootstrap: str, schema_registry: str, spark: Any
) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = create_topic(kafka_bootstrap, 1)
    schema = {"type": "object", "title": "Order", "required": ["id"],
              "properties": {"id": {"type": "integer"}, "amount": {"type": "number"},
                             "key": {"type": "string"}}}
    serialize = JSONSerializer(json.dumps(schema), SchemaRegistryClient({"url": schema_registry}))
    context = SerializationContext(topic, MessageField.VALUE)
    produce(kafka_bootstrap, topic, [
        (0, b"k", serialize({"id": i, "amount": i * 1.5, "key": f"o{i}"}, context), None)
        for i in (1, 2)])
    sql = f"SELECT id + 10 AS id, amount, value_key FROM {topic.replace('-', '_')} ORDER BY id"
    with override_settings(SCHEMA_REGISTRY_URL=schema_registry):
        answer = analyst.post("/api/v1/streams/adhoc", {"sql": sql, "timeout_s": 240},
                              content_type="application/json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["rows"] == [[11, 1.5, "o1"], [12, 3.0, "o2"]]


@pytest.mark.parametrize("value_format", ["avro", "jsonschema", "protobuf"])
def test_a_query_writes_its_rows_through_the_registry_for_confluents_deserializers(
    value_format: str, kafka_bootstrap: str, schema_registry: str, spark: Any
) -> None:
    """The registry output formats: the row in the wire format with a schema derived from
    its type and registered as `<topic>-value`, read back by confluent-kafka's own
    deserializers (the sink path the driver takes, on a batch of the same rows)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from google.protobuf.json_format import MessageToDict

    from controlcenter.streams import views

    output = create_topic(kafka_bootstrap, 1)
    rows = spark.sql("SELECT * FROM VALUES ('a', 5L, 1.5D), ('b', 3L, 2.0D) AS t(k, n, total)")
    frame = views.sink_frame(rows, "k", value_format, schema_registry, output)
    (frame.write.format("millrace-kafka").option("kafka.bootstrap.servers", kafka_bootstrap)
     .option("topic", output).mode("append").save())

    registry = SchemaRegistryClient({"url": schema_registry})
    latest = registry.get_latest_version(f"{output}-value").schema
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": f"t-{uuid.uuid4().hex}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(output, 0, 0)])
    raw: list[Any] = []
    deadline = time.monotonic() + 30
    while len(raw) < 2 and time.monotonic() < deadline:
        if (message := consumer.poll(1.0)) is not None and not message.error():
            raw.append(message)
    consumer.close()
    context = SerializationContext(output, MessageField.VALUE)
    if value_format == "avro":
        values = [AvroDeserializer(registry)(m.value(), context) for m in raw]
    elif value_format == "jsonschema":
        values = [JSONDeserializer(latest.schema_str, schema_registry_client=registry)(
            m.value(), context) for m in raw]
    else:
        from google.protobuf import descriptor_pool, message_factory

        from registry.protobuf import compiler

        file, dependencies = compiler.compile_text(latest.schema_str, {})
        file.name = f"{output}.proto"
        pool = descriptor_pool.DescriptorPool()
        for each in [*dependencies, file]:
            pool.Add(each)
        package = f"{file.package}." if file.package else ""
        pool_message = message_factory.GetMessageClass(
            pool.FindMessageTypeByName(package + file.message_type[0].name))
        decode = ProtobufDeserializer(pool_message, {"use.deprecated.format": False})
        values = [MessageToDict(decode(m.value(), context), preserving_proto_field_name=True,
                                always_print_fields_with_no_presence=True) for m in raw]
        for value in values:
            value["n"] = int(value["n"])
    read = [(m.key().decode(), v["k"], v["n"], v["total"])
            for m, v in zip(raw, values, strict=True)]
    assert sorted(read) == [("a", "a", 5, 1.5), ("b", "b", 3, 2.0)]

# --- joins: the driver's own start, in this process's Spark session ----------------------------

@contextmanager
def driver_query(spark: Any, bootstrap: str, tmp_path: Path, sql: str, output: str,
                 key_column: str = "") -> Iterator[Any]:
    """The query as its driver starts it (controlcenter.streams.driver.start), run here: the
    SQL through the topic views, Spark's start-time checks, the exactly-once sink."""
    from controlcenter.streams import driver

    spec = {"name": f"join_{uuid.uuid4().hex[:8]}", "sql": sql, "bootstrap": bootstrap,
            "topics": list(topic_names(bootstrap)), "output_topic": output,
            "key_column": key_column, "value_format": "json", "output_mode": "append",
            "checkpoint": str(tmp_path / "checkpoint")}
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", str(driver.SHUFFLE_PARTITIONS))
    query = driver.start(spark, spec)
    try:
        yield query
    finally:
        query.stop()
        spark.conf.set("spark.sql.shuffle.partitions", before)


def topic_names(bootstrap: str) -> list[str]:
    from confluent_kafka.admin import AdminClient

    return list(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).topics)


def output_rows(bootstrap: str, topic: str, count: int) -> list[dict[str, Any]]:
    found = wait_until(lambda: (r := committed_records(bootstrap, topic)) and len(r) >= count
                       and r, f"{count} rows in {topic}", 300)
    return sorted((row for _, row in found), key=json.dumps)


@pytest.mark.timeout(600)
def test_a_stream_stream_join_with_watermarks_and_a_time_bound_emits_matches_and_misses(
    kafka_bootstrap: str, spark: Any, tmp_path: Path
) -> None:
    orders, payments = create_topic(kafka_bootstrap, 2), create_topic(kafka_bootstrap, 1)
    output = create_topic(kafka_bootstrap, 1)
    t = BASE_MS
    produce(kafka_bootstrap, orders, [(0, b"a", b"apples", t), (1, b"b", b"bread", t),
                                      (0, b"c", b"cheese", t)])
    # a pays within the 30 s bound, b too late, c never.
    produce(kafka_bootstrap, payments, [(0, b"a", b"paid-a", t + 10_000),
                                        (0, b"b", b"paid-b", t + 60_000)])
    sql = f"""
SELECT CAST(o.key AS STRING) AS id, CAST(o.value AS STRING) AS item,
       CAST(p.value AS STRING) AS payment
FROM (SELECT * FROM {orders.replace('-', '_')} WATERMARK timestamp DELAY OF INTERVAL 5 SECONDS) o
LEFT JOIN (SELECT * FROM {payments.replace('-', '_')}
           WATERMARK timestamp DELAY OF INTERVAL 5 SECONDS) p
  ON o.key = p.key AND p.timestamp BETWEEN o.timestamp AND o.timestamp + INTERVAL 30 SECONDS"""
    with driver_query(spark, kafka_bootstrap, tmp_path, sql, output, key_column="id"):
        assert output_rows(kafka_bootstrap, output, 1) == [
            {"id": "a", "item": "apples", "payment": "paid-a"}]
        # Both watermarks move past the bound: the orders without a payment in it come out.
        produce(kafka_bootstrap, orders, [(1, b"z", b"zucchini", t + 600_000)])
        produce(kafka_bootstrap, payments, [(0, b"y", b"paid-y", t + 600_000)])
        assert output_rows(kafka_bootstrap, output, 3) == [
            {"id": "a", "item": "apples", "payment": "paid-a"},
            {"id": "b", "item": "bread"}, {"id": "c", "item": "cheese"}]


@pytest.mark.timeout(600)
def test_a_stream_table_join_sees_table_updates_made_while_the_query_runs(
    kafka_bootstrap: str, spark: Any, tmp_path: Path
) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    clicks, output = create_topic(kafka_bootstrap, 1), create_topic(kafka_bootstrap, 1)
    users = f"users-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(users, 1, 1, config={"cleanup.policy": "compact"})])[
        users].result(30)
    produce(kafka_bootstrap, users, [(0, b"u1", b"Ada", None), (0, b"u2", b"Bob", None),
                                     (0, b"u1", b"Ada Lovelace", None)])
    produce(kafka_bootstrap, clicks, [(0, b"u1", b"home", None), (0, b"u2", b"cart", None),
                                      (0, b"u3", b"faq", None)])
    sql = f"""
SELECT CAST(c.key AS STRING) AS user_id, CAST(c.value AS STRING) AS page,
       CAST(u.value AS STRING) AS name
FROM {clicks.replace('-', '_')} c JOIN {users.replace('-', '_')}_table u ON c.key = u.key"""
    first = [{"name": "Ada Lovelace", "page": "home", "user_id": "u1"},
             {"name": "Bob", "page": "cart", "user_id": "u2"}]
    tombstone: Any = None
    with driver_query(spark, kafka_bootstrap, tmp_path, sql, output):
        assert output_rows(kafka_bootstrap, output, 2) == first
        # The table changes while the query runs: u2 deleted (a tombstone), u3 arrives, u1
        # renamed. Clicks produced after it join the table as it is now, in the same run (the
        # u1 click last: once its row is out, a row for u2's would be out too).
        produce(kafka_bootstrap, users, [(0, b"u2", tombstone, None), (0, b"u3", b"Cy", None),
                                         (0, b"u1", b"Countess Ada", None)])
        produce(kafka_bootstrap, clicks, [(0, b"u2", b"pay", None), (0, b"u3", b"docs", None),
                                          (0, b"u1", b"help", None)])
        running = output_rows(kafka_bootstrap, output, 4)
    assert in_order(running) == in_order([
        *first, {"name": "Cy", "page": "docs", "user_id": "u3"},
        {"name": "Countess Ada", "page": "help", "user_id": "u1"}])
    # Stopped, the table changes again; the query started again on its checkpoint joins the
    # clicks it had not read against the table as it is then.
    produce(kafka_bootstrap, users, [(0, b"u3", b"Cy Young", None)])
    produce(kafka_bootstrap, clicks, [(0, b"u3", b"blog", None)])
    with driver_query(spark, kafka_bootstrap, tmp_path, sql, output):
        rows = output_rows(kafka_bootstrap, output, 5)
    assert in_order(rows) == in_order(
        [*running, {"name": "Cy Young", "page": "blog", "user_id": "u3"}])


def in_order(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda row: json.dumps(row, sort_keys=True))


# --- a windowed aggregation, exactly once across crashes ----------------------------------------

# In `make faults`, not the default run: three driver JVM starts and two kills take minutes
# on two cores (up to 13 under load), more than the whole suite's budget allows one test.
@pytest.mark.faults
@pytest.mark.timeout(1800)  # three driver starts (JVMs) on a machine shared with other runs
def test_a_windowed_count_is_exact_after_its_driver_is_killed_and_the_worker_restarted(
    analyst: Client, kafka_bootstrap: str, worker: Callable[[], None], spark: Any
) -> None:
    source, output = create_topic(kafka_bootstrap, 2), create_topic(kafka_bootstrap, 1)
    produce(kafka_bootstrap, source, records(source, 0, {"a": 5, "b": 3}))
    produce(kafka_bootstrap, source, records(source, 10, {"a": 2}))
    answer = create(analyst, "windowed", WINDOWED_SQL.format(topic=source.replace("-", "_")),
                    output, key_column="k")
    assert answer.status_code == 202, answer.content
    assert answer.json()["source_topics"] == [source]
    first = running_with_progress("windowed")

    # The driver dies (SIGKILL, JVM and all): its task starts it again on the checkpoint.
    assert first.driver_pid is not None and first.last_progress is not None
    os.killpg(first.driver_pid, signal.SIGKILL)
    wait_until(lambda: query_row("windowed").restarts >= 1, "a restart after the crash")
    produce(kafka_bootstrap, source, records(source, 10, {"c": 4}))
    running_with_progress("windowed", batches_after=first.last_progress["batch_id"])

    # The platform restarts: the worker goes away and comes back; the query resumes.
    worker()
    produce(kafka_bootstrap, source, records(source, 20, {"b": 6}))
    produce(kafka_bootstrap, source, records(source, 100, {"z": 1}))  # the watermark moves on
    expected = {(0, "a"): 5, (0, "b"): 3, (10, "a"): 2, (10, "c"): 4, (20, "b"): 6}

    def counted() -> dict[tuple[int, str], int] | None:
        found = committed_records(kafka_bootstrap, output)
        got = {}
        for key, row in found:
            start = datetime.fromisoformat(row["window_start"].replace("Z", "+00:00"))
            got[(round(start.timestamp() * 1000 - BASE_MS) // 1000, key)] = row["n"]
        keys = Counter((k, r["window_start"]) for k, r in found)
        assert max(keys.values(), default=1) == 1, f"a window written twice: {found}"
        return got if len(got) >= len(expected) else None

    assert wait_until(counted, "every closed window in the output") == expected
    q = query_row("windowed")
    assert q.state == StreamState.RUNNING and q.restarts >= 1
    assert (q.last_progress or {}).get("watermark"), q.last_progress

    # Stop, restart and delete, through the API and the command.
    assert analyst.post("/api/v1/streams/queries/windowed/stop").status_code == 202
    wait_until(lambda: query_row("windowed").state == StreamState.STOPPED, "stopped")
    call_command("streams", "restart", "windowed")
    assert query_row("windowed").state in (StreamState.QUEUED, StreamState.RUNNING)
    call_command("streams", "delete", "windowed")  # its task sees the row gone, ends the driver
    assert not StreamQuery.objects.filter(name="windowed").exists()
    wait_until(lambda: not Path(q.checkpoint).exists(), "the checkpoint removed")
    # Nothing was written twice by the restarts.
    final = committed_records(kafka_bootstrap, output)
    assert len(final) == len(expected)
