"""The JDBC-style connectors on SQLite through a worker process: a table polled by its
incrementing column into a topic, and the topic upserted into another database's table;
a database that refuses fails the task with the error in /status."""

from __future__ import annotations

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
    json = {"value.converter": "org.apache.kafka.connect.json.JsonConverter"}
    _post(worker, f"src-{prefix}", {
        "connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
        "connection.url": f"jdbc:sqlite:{source_db}", "mode": "incrementing",
        "incrementing.column.name": "id", "table.whitelist": "orders",
        "topic.prefix": prefix, "poll.interval.ms": "200", **json})
    _post(worker, f"sink-{prefix}", {
        "connector.class": "JdbcSinkConnector", "connection.url": f"sqlite:{sink_db}",
        "topics": f"{prefix}orders", "table.name.format": "copy", "insert.mode": "upsert",
        "pk.mode": "record_value", "pk.fields": "id", "auto.create": "true", **json})
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
    json = {"value.converter": "org.apache.kafka.connect.json.JsonConverter"}
    _post(worker, f"src-{prefix}", {
        "connector.class": "JdbcSourceConnector", "connection.url": f"jdbc:sqlite:{source_db}",
        "mode": "incrementing", "incrementing.column.name": "id", "table.whitelist": "items",
        "topic.prefix": prefix, "poll.interval.ms": "200", **json})
    _post(worker, f"pg-sink-{prefix}", {
        "connector.class": "JdbcSinkConnector", "connection.url": f"jdbc:{postgres_url}",
        "topics": f"{prefix}items", "table.name.format": "items_copy", "insert.mode": "upsert",
        "pk.mode": "record_value", "pk.fields": "id", "auto.create": "true", **json})
    copied = "SELECT id, name FROM items_copy ORDER BY id"
    wait_for(lambda: _pg_rows(postgres_url, copied) == [(1, "n1"), (2, "n2"), (3, "n3")], 40,
             "the rows never reached PostgreSQL")
    _post(worker, f"pg-src-{prefix}", {
        "connector.class": "JdbcSourceConnector", "connection.url": f"jdbc:{postgres_url}",
        "mode": "incrementing", "incrementing.column.name": "id",
        "table.whitelist": "items_copy", "topic.prefix": prefix, "poll.interval.ms": "200",
        **json})
    committed = [{"partition": {"table": "items_copy"}, "offset": {"incrementing": 3}}]
    wait_for(lambda: worker.get(f"/connectors/pg-src-{prefix}/offsets").json()["offsets"]
             == committed, 40, "PostgreSQL's rows were never read")
