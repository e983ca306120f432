"""The JDBC-style connectors on SQLite through a worker process: a table polled by its
incrementing column into a topic, and the topic upserted into another database's table;
a database that refuses fails the task with the error in /status; Connect's logical types
(Kafka's JSON envelope) become DECIMAL, DATE, TIME and TIMESTAMP columns."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import os
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.connect.workers import WorkerProcess, wait_for


@pytest.fixture(scope="module")
def worker(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[WorkerProcess]:
    proc = WorkerProcess(tmp_path_factory.mktemp("connect-jdbc"), kafka_bootstrap,
                         f"connect-jdbc-{uuid.uuid4().hex[:8]}")
    proc.start()
    yield proc
    proc.stop()


POSTGRES_URL = os.environ.get("MILLRACE_TEST_POSTGRES_URL",
                              "postgresql://postgres@127.0.0.1:5432/postgres")


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A PostgreSQL database of this test's own, dropped afterwards."""
    name = f"test_connect_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as server:
        server.execute(f'CREATE DATABASE "{name}"')
    yield POSTGRES_URL.rsplit("/", 1)[0] + "/" + name
    with psycopg.connect(POSTGRES_URL, autocommit=True) as server:
        server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _pg_rows(url: str, sql: str) -> list[Any]:
    with psycopg.connect(url) as db:
        try:
            return db.execute(sql).fetchall()
        except psycopg.errors.UndefinedTable:
            return []


def _rows(path: Path, sql: str) -> list[Any]:
    with sqlite3.connect(path) as db:
        try:
            return db.execute(sql).fetchall()
        except sqlite3.OperationalError:
            return []


def _post(worker: WorkerProcess, name: str, config: dict[str, str]) -> None:
    answer = worker.request("POST", "/connectors", {"name": name, "config": config})
    assert answer.status_code == 201, answer.text


def test_a_table_is_copied_through_a_topic_and_upserted_by_key(
        worker: WorkerProcess, tmp_path: Path) -> None:
    source_db, sink_db = tmp_path / "source.db", tmp_path / "sink.db"
    with sqlite3.connect(source_db) as db:
        db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT, units REAL)")
        db.executemany("INSERT INTO orders VALUES (?, ?, ?)",
                       [(i, f"item-{i}", i / 2) for i in range(1, 6)])
    prefix = f"jdbc-{uuid.uuid4().hex[:6]}-"
    as_json = {"value.converter": "org.apache.kafka.connect.json.JsonConverter"}
    _post(worker, f"src-{prefix}", {
        "connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
        "connection.url": f"jdbc:sqlite:{source_db}", "mode": "incrementing",
        "incrementing.column.name": "id", "table.whitelist": "orders",
        "topic.prefix": prefix, "poll.interval.ms": "200", **as_json})
    _post(worker, f"sink-{prefix}", {
        "connector.class": "JdbcSinkConnector", "connection.url": f"sqlite:{sink_db}",
        "topics": f"{prefix}orders", "table.name.format": "copy", "insert.mode": "upsert",
        "pk.mode": "record_value", "pk.fields": "id", "auto.create": "true", **as_json})
    copied = "SELECT id, item, units FROM copy ORDER BY id"
    wait_for(lambda: len(_rows(sink_db, copied)) == 5, 40, "the first 5 rows never arrived")
    with sqlite3.connect(source_db) as db:
        db.executemany("INSERT INTO orders VALUES (?, ?, ?)",
                       [(i, f"item-{i}", i / 2) for i in range(6, 9)])
    wait_for(lambda: len(_rows(sink_db, copied)) == 8, 40, "the new rows never arrived")
    assert _rows(sink_db, copied) == _rows(source_db, "SELECT * FROM orders ORDER BY id")
    committed = [{"partition": {"table": "orders"}, "offset": {"incrementing": 8}}]
    wait_for(lambda: worker.get(f"/connectors/src-{prefix}/offsets").json()["offsets"]
             == committed, 20, "the source's offsets were never committed")


def test_a_database_that_refuses_fails_the_task_and_bad_configs_are_refused(
        worker: WorkerProcess, tmp_path: Path, kafka_bootstrap: str) -> None:
    from confluent_kafka import Producer
    topic = f"jdbc-refused-{uuid.uuid4().hex[:6]}"
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(topic, b'{"id": 1}')
    producer.flush(10)
    name = f"refused-{uuid.uuid4().hex[:6]}"
    _post(worker, name, {
        "connector.class": "JdbcSinkConnector", "connection.url": f"sqlite:{tmp_path / 'x.db'}",
        "topics": topic, "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false"})

    def failed() -> str | None:
        tasks = worker.get(f"/connectors/{name}/status").json().get("tasks", [])
        return tasks[0].get("trace") if tasks and tasks[0]["state"] == "FAILED" else None
    trace = wait_for(failed, 40, "the task never failed")
    assert "The database refused" in trace and "no such table" in trace
    assert worker.get("/").status_code == 200
    upsert_without_key = worker.request("POST", "/connectors", {"name": "u", "config": {
        "connector.class": "JdbcSinkConnector", "connection.url": "sqlite:/tmp/u.db",
        "topics": "t", "insert.mode": "upsert"}})
    assert upsert_without_key.status_code == 400
    assert "upsert needs pk.mode" in upsert_without_key.json()["message"]


def test_postgresql_takes_upserts_and_is_polled_by_its_incrementing_column(
        worker: WorkerProcess, tmp_path: Path, postgres_url: str) -> None:
    source_db = tmp_path / "source.db"
    with sqlite3.connect(source_db) as db:
        db.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)")
        db.executemany("INSERT INTO items VALUES (?, ?)", [(i, f"n{i}") for i in range(1, 4)])
    prefix = f"pg-{uuid.uuid4().hex[:6]}-"
    as_json = {"value.converter": "org.apache.kafka.connect.json.JsonConverter"}
    _post(worker, f"src-{prefix}", {
        "connector.class": "JdbcSourceConnector", "connection.url": f"jdbc:sqlite:{source_db}",
        "mode": "incrementing", "incrementing.column.name": "id", "table.whitelist": "items",
        "topic.prefix": prefix, "poll.interval.ms": "200", **as_json})
    _post(worker, f"pg-sink-{prefix}", {
        "connector.class": "JdbcSinkConnector", "connection.url": f"jdbc:{postgres_url}",
        "topics": f"{prefix}items", "table.name.format": "items_copy", "insert.mode": "upsert",
        "pk.mode": "record_value", "pk.fields": "id", "auto.create": "true", **as_json})
    copied = "SELECT id, name FROM items_copy ORDER BY id"
    wait_for(lambda: _pg_rows(postgres_url, copied) == [(1, "n1"), (2, "n2"), (3, "n3")], 40,
             "the rows never reached PostgreSQL")
    _post(worker, f"pg-src-{prefix}", {
        "connector.class": "JdbcSourceConnector", "connection.url": f"jdbc:{postgres_url}",
        "mode": "incrementing", "incrementing.column.name": "id",
        "table.whitelist": "items_copy", "topic.prefix": prefix, "poll.interval.ms": "200",
        **as_json})
    committed = [{"partition": {"table": "items_copy"}, "offset": {"incrementing": 3}}]
    wait_for(lambda: worker.get(f"/connectors/pg-src-{prefix}/offsets").json()["offsets"]
             == committed, 40, "PostgreSQL's rows were never read")


# Kafka's JsonConverter envelope with Connect's logical types, as a Java worker writes it:
# 12345678901 at scale 2 in base64 (two's complement), days, ms of the day, ms since epoch.
LOGICAL_SCHEMA = {"type": "struct", "name": "shop.payment", "optional": False, "fields": [
    {"field": "id", "type": "int32", "optional": False},
    {"field": "amount", "type": "bytes", "optional": False, "version": 1,
     "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2"}},
    {"field": "day", "type": "int32", "optional": False, "version": 1,
     "name": "org.apache.kafka.connect.data.Date"},
    {"field": "at", "type": "int32", "optional": False, "version": 1,
     "name": "org.apache.kafka.connect.data.Time"},
    {"field": "ts", "type": "int64", "optional": True, "version": 1,
     "name": "org.apache.kafka.connect.data.Timestamp"}]}
LOGICAL_ROWS = [
    (1, base64.b64encode((12345678901).to_bytes(5, "big", signed=True)).decode(), 19782,
     45_296_789, 1_709_209_801_250),
    (2, base64.b64encode((-5).to_bytes(1, "big", signed=True)).decode(), 0, 0, None)]
EXPECTED = [(1, decimal.Decimal("123456789.01"), dt.date(2024, 2, 29),
             dt.time(12, 34, 56, 789000), dt.datetime(2024, 2, 29, 12, 30, 1, 250000)),
            (2, decimal.Decimal("-0.05"), dt.date(1970, 1, 1), dt.time(0, 0), None)]


def _produce_logical(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap})
    for row in LOGICAL_ROWS:
        payload = dict(zip(("id", "amount", "day", "at", "ts"), row, strict=True))
        producer.produce(topic, json.dumps({"schema": LOGICAL_SCHEMA, "payload": payload}))
    assert producer.flush(10) == 0


def _logical_sink(worker: WorkerProcess, topic: str, url: str) -> None:
    _post(worker, f"sink-{topic}-{uuid.uuid4().hex[:4]}", {
        "connector.class": "JdbcSinkConnector", "connection.url": url, "topics": topic,
        "table.name.format": "payments", "auto.create": "true",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true"})


def test_logical_types_land_in_sqlite_and_postgresql_columns_of_their_sql_types(
        worker: WorkerProcess, tmp_path: Path, postgres_url: str, kafka_bootstrap: str) -> None:
    topic = f"jdbc-logical-{uuid.uuid4().hex[:6]}"
    _produce_logical(kafka_bootstrap, topic)
    sqlite_db = tmp_path / "payments.db"
    _logical_sink(worker, topic, f"jdbc:sqlite:{sqlite_db}")
    _logical_sink(worker, topic, f"jdbc:{postgres_url}")

    select = "SELECT id, amount, day, at, ts FROM payments ORDER BY id"
    wait_for(lambda: _pg_rows(postgres_url, select) == EXPECTED, 60,
             f"PostgreSQL never held the rows: {_pg_rows(postgres_url, select)}")
    types = _pg_rows(postgres_url, "SELECT column_name, data_type FROM "
                                   "information_schema.columns WHERE table_name = 'payments'")
    assert dict(types) == {"id": "integer", "amount": "numeric", "day": "date",
                           "at": "time without time zone",
                           "ts": "timestamp without time zone"}

    wait_for(lambda: len(_rows(sqlite_db, select)) == 2, 60, "SQLite never held the rows")
    declared = {r[1]: r[2] for r in _rows(sqlite_db, "PRAGMA table_info(payments)")}
    assert declared == {"id": "INTEGER", "amount": "DECIMAL", "day": "DATE", "at": "TIME",
                        "ts": "TIMESTAMP"}
    rows = _rows(sqlite_db, select)
    assert [(i, decimal.Decimal(str(a))) for i, a, *_ in rows] == [
        (1, decimal.Decimal("123456789.01")), (2, decimal.Decimal("-0.05"))]
    assert [r[2:] for r in rows] == [("2024-02-29", "12:34:56.789000",
                                      "2024-02-29 12:30:01.250000"),
                                     ("1970-01-01", "00:00:00", None)]
