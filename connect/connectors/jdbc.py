"""JDBC-style sink and source for SQLite and PostgreSQL, with the keys of Confluent's JDBC
connectors (io.confluent.connect.jdbc.JdbcSinkConnector / JdbcSourceConnector).

`connection.url` is a JDBC URL (`jdbc:sqlite:/path/db.sqlite`,
`jdbc:postgresql://host:5432/db`) or the same without `jdbc:`; `connection.user` and
`connection.password` go with PostgreSQL. SQLite goes through the standard library's
sqlite3, PostgreSQL through psycopg (the platform's driver).

The sink writes each record's value (a struct, or a schemaless JSON object) as a row of
`table.name.format` (`${topic}`): `insert.mode` insert or upsert (INSERT ... ON CONFLICT),
`pk.mode` none, record_key (the key, or its fields) or record_value (`pk.fields` of the
value), `auto.create` makes the table from the first record. Rows are committed in
`flush()`, before the offsets, so a replayed batch upserts the same rows again.

The source polls each table of `table.whitelist` every `poll.interval.ms` for rows past its
offset, by `mode` incrementing (`incrementing.column.name`) or timestamp
(`timestamp.column.name`), `batch.max.rows` at a time, into `topic.prefix` + table, with the
partition {"table"} and the offset {"incrementing"} or {"timestamp"}.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
import sqlite3
import time
from collections.abc import Mapping, Sequence
from typing import Any

from connect import logical
from connect.api import (
    ConnectException,
    Schema,
    SinkConnector,
    SinkRecord,
    SinkTask,
    SourceConnector,
    SourceRecord,
    SourceTask,
    Task,
)
from connect.configdef import (
    NO_DEFAULT,
    ConfigDef,
    ConfigException,
    Importance,
    Type,
    at_least,
    one_of,
)

VERSION = "10.8.0"
SQL_TYPES = {"int8": "SMALLINT", "int16": "SMALLINT", "int32": "INTEGER", "int64": "BIGINT",
             "float32": "REAL", "float64": "DOUBLE PRECISION", "boolean": "BOOLEAN",
             "string": "TEXT", "bytes": "BYTEA"}

# Connect's logical types, as Confluent's PostgreSQL dialect creates them (SQLite takes the
# same names: DECIMAL has its numeric affinity, the others hold ISO text)
LOGICAL_SQL_TYPES = {logical.DECIMAL: "DECIMAL", logical.DATE: "DATE", logical.TIME: "TIME",
                     logical.TIMESTAMP: "TIMESTAMP"}


def _url(name: str, value: Any) -> None:
    if value is not None and not re.match(r"^(jdbc:)?(sqlite:|postgresql://)", str(value)):
        raise ConfigException(f"Invalid value {value} for configuration {name}: not a "
                              "jdbc:sqlite: or jdbc:postgresql:// URL")


def connect_db(props: Mapping[str, str]) -> Any:
    url = props["connection.url"].removeprefix("jdbc:")
    try:
        if url.startswith("sqlite:"):
            return sqlite3.connect(url.removeprefix("sqlite:"), timeout=10,
                                   check_same_thread=False)
        import psycopg
        return psycopg.connect(url, user=props.get("connection.user") or None,
                               password=props.get("connection.password") or None,
                               connect_timeout=10)
    except Exception as exc:  # both drivers' errors: the database refused us
        raise ConnectException(f"Could not connect to {url}: {exc}") from exc


def _quote(name: str) -> str:
    """A quoted SQL identifier (topics may hold `-` and `.`)."""
    if not name or "\x00" in name:
        raise ConnectException(f"Not a valid SQL identifier: {name!r}")
    return '"' + name.replace('"', '""') + '"'


def _connection_def() -> ConfigDef:
    return (ConfigDef()
            .define("connection.url", Type.STRING, NO_DEFAULT, Importance.HIGH,
                    "JDBC connection URL (jdbc:sqlite:<path> or jdbc:postgresql://...)",
                    validator=_url)
            .define("connection.user", Type.STRING, None, Importance.HIGH, "JDBC user")
            .define("connection.password", Type.PASSWORD, None, Importance.HIGH,
                    "JDBC password"))


class JdbcSinkConnector(SinkConnector):
    kafka_class = "io.confluent.connect.jdbc.JdbcSinkConnector"

    def version(self) -> str:
        return VERSION

    def config(self) -> ConfigDef:
        return (_connection_def()
                .define("insert.mode", Type.STRING, "insert", Importance.HIGH,
                        "insert or upsert", validator=one_of("insert", "upsert"))
                .define("pk.mode", Type.STRING, "none", Importance.HIGH,
                        "none, record_key or record_value",
                        validator=one_of("none", "record_key", "record_value"))
                .define("pk.fields", Type.LIST, "", Importance.MEDIUM,
                        "The primary key's columns")
                .define("table.name.format", Type.STRING, "${topic}", Importance.MEDIUM,
                        "The table, ${topic} standing for the record's topic")
                .define("auto.create", Type.BOOLEAN, False, Importance.MEDIUM,
                        "Create the table from the first record's fields"))

    def validate(self, props: Mapping[str, str]) -> dict[str, Any]:
        values = super().validate(props)
        if props.get("insert.mode") == "upsert" and props.get("pk.mode", "none") == "none":
            values["pk.mode"].errors.append("upsert needs pk.mode record_key or record_value")
        return values

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type[Task]:
        return JdbcSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props) for _ in range(max_tasks)]


def _column_type(schema: Schema | None, value: Any) -> str:
    if schema is not None:
        return LOGICAL_SQL_TYPES.get(schema.name or "") or SQL_TYPES.get(schema.type, "TEXT")
    if isinstance(value, bool):
        return "BOOLEAN"
    if isinstance(value, int):
        return "BIGINT"
    if isinstance(value, float):
        return "DOUBLE PRECISION"
    return "TEXT"


class JdbcSinkTask(SinkTask):
    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)
        self.db = connect_db(props)
        self.sqlite = isinstance(self.db, sqlite3.Connection)
        self.upsert = props.get("insert.mode", "insert") == "upsert"
        self.pk_mode = props.get("pk.mode", "none")
        self.pk_fields = [f.strip() for f in props.get("pk.fields", "").split(",") if f.strip()]
        self.created: set[str] = set()

    def _row(self, record: SinkRecord) -> dict[str, Any]:
        if not isinstance(record.value, Mapping):
            raise ConnectException(f"{record.topic}-{record.kafka_partition}@"
                                   f"{record.kafka_offset}: the value is not a struct")
        row = dict(record.value)
        if self.pk_mode == "record_key":
            if isinstance(record.key, Mapping):
                row.update(record.key)
            else:
                row[(self.pk_fields or ["__connect_key"])[0]] = record.key
        return row

    def _keys(self, row: Mapping[str, Any], record: SinkRecord) -> list[str]:
        if self.pk_mode == "none":
            return []
        if self.pk_fields:
            return self.pk_fields
        if self.pk_mode == "record_key" and isinstance(record.key, Mapping):
            return list(record.key)
        if self.pk_mode == "record_key":
            return ["__connect_key"]
        raise ConnectException("pk.mode record_value needs pk.fields")

    def put(self, records: list[SinkRecord]) -> None:
        for record in records:
            table = self.props.get("table.name.format", "${topic}").replace("${topic}",
                                                                             record.topic)
            row = self._row(record)
            keys = self._keys(row, record)
            if table not in self.created and self.props.get("auto.create") == "true":
                self._create(table, row, keys, record.value_schema)
            self._write(table, row, keys)

    def _create(self, table: str, row: Mapping[str, Any], keys: Sequence[str],
                schema: Schema | None) -> None:
        fields = dict(schema.fields) if schema is not None else {}
        columns = [f"{_quote(c)} {_column_type(fields.get(c), v)}" for c, v in row.items()]
        if keys:
            columns.append(f"PRIMARY KEY ({', '.join(_quote(k) for k in keys)})")
        self._execute(f"CREATE TABLE IF NOT EXISTS {_quote(table)} ({', '.join(columns)})", ())
        self.created.add(table)

    def _write(self, table: str, row: Mapping[str, Any], keys: Sequence[str]) -> None:
        mark = "?" if self.sqlite else "%s"
        columns = list(row)
        sql = (f"INSERT INTO {_quote(table)} ({', '.join(_quote(c) for c in columns)}) "
               f"VALUES ({', '.join(mark for _ in columns)})")
        if self.upsert and keys:
            updates = [f"{_quote(c)} = excluded.{_quote(c)}" for c in columns if c not in keys]
            sql += f" ON CONFLICT ({', '.join(_quote(k) for k in keys)}) DO " + (
                f"UPDATE SET {', '.join(updates)}" if updates else "NOTHING")
        self._execute(sql, [self._param(row[c]) for c in columns])

    def _param(self, value: Any) -> Any:
        """A logical type's value for the driver. A Timestamp goes into TIMESTAMP columns as
        UTC without a zone (Confluent's `db.timezone` default); psycopg takes Decimal, date
        and time as they are, and SQLite gets their text (its own adapters are deprecated)."""
        if isinstance(value, dt.datetime) and value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        if not self.sqlite:
            return value
        if isinstance(value, decimal.Decimal):
            return str(value)
        if isinstance(value, dt.datetime):
            return value.isoformat(" ")
        if isinstance(value, dt.date | dt.time):
            return value.isoformat()
        return value

    def _execute(self, sql: str, params: Sequence[Any]) -> None:
        try:
            self.db.execute(sql, params)
        except Exception as exc:  # sqlite3's and psycopg's errors: the database refused
            self.db.rollback()
            raise ConnectException(f"The database refused {sql!r}: {exc}") from exc

    def flush(self, offsets: Mapping[tuple[str, int], int]) -> None:
        self.db.commit()

    def stop(self) -> None:
        self.db.close()


class JdbcSourceConnector(SourceConnector):
    kafka_class = "io.confluent.connect.jdbc.JdbcSourceConnector"

    def version(self) -> str:
        return VERSION

    def config(self) -> ConfigDef:
        return (_connection_def()
                .define("mode", Type.STRING, NO_DEFAULT, Importance.HIGH,
                        "incrementing or timestamp", validator=one_of("incrementing",
                                                                      "timestamp"))
                .define("incrementing.column.name", Type.STRING, "", Importance.MEDIUM,
                        "A strictly increasing column (mode incrementing)")
                .define("timestamp.column.name", Type.STRING, "", Importance.MEDIUM,
                        "A column that grows with each change (mode timestamp)")
                .define("table.whitelist", Type.LIST, NO_DEFAULT, Importance.HIGH,
                        "The tables to copy")
                .define("topic.prefix", Type.STRING, "", Importance.HIGH,
                        "Prefix of each table's topic")
                .define("poll.interval.ms", Type.INT, 5000, Importance.HIGH,
                        "How often each table is polled", validator=at_least(1))
                .define("batch.max.rows", Type.INT, 100, Importance.LOW,
                        "The most rows a poll returns", validator=at_least(1)))

    def validate(self, props: Mapping[str, str]) -> dict[str, Any]:
        values = super().validate(props)
        column = f"{props.get('mode')}.column.name"
        if column in values and not props.get(column, "").strip():
            values[column].errors.append(f"mode {props.get('mode')} needs {column}")
        return values

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type[Task]:
        return JdbcSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        tables = [t.strip() for t in self.props["table.whitelist"].split(",") if t.strip()]
        groups = [tables[i::max_tasks] for i in range(min(max_tasks, len(tables)))]
        return [{**self.props, "tables": ",".join(group)} for group in groups]

    def exactly_once_support(self, props: Mapping[str, str]) -> bool | None:
        return True  # offsets are column values: a restart reads on after them


class JdbcSourceTask(SourceTask):
    def start(self, props: Mapping[str, str]) -> None:
        self.db = connect_db(props)
        self.sqlite = isinstance(self.db, sqlite3.Connection)
        mode = props["mode"]
        self.column = props[f"{mode}.column.name"]
        self.offset_key = mode
        self.tables = [t for t in props["tables"].split(",") if t]
        self.prefix = props.get("topic.prefix", "")
        self.interval = int(props.get("poll.interval.ms", 5000)) / 1000
        self.limit = int(props.get("batch.max.rows", 100))
        self.last: dict[str, Any] = {}
        for table in self.tables:
            stored = self.context.offset_storage_reader.offset({"table": table})
            self.last[table] = stored[mode] if stored else None
        self.next_poll = 0.0

    def poll(self) -> list[SourceRecord] | None:
        wait = self.next_poll - time.monotonic()
        if wait > 0:
            time.sleep(min(wait, 1))
            return None
        records = [r for table in self.tables for r in self._read(table)]
        if len(records) < self.limit * len(self.tables):
            self.next_poll = time.monotonic() + self.interval
        return records or None

    def _read(self, table: str) -> list[SourceRecord]:
        mark = "?" if self.sqlite else "%s"
        column = _quote(self.column)
        where = f" WHERE {column} > {mark}" if self.last[table] is not None else ""
        sql = f"SELECT * FROM {_quote(table)}{where} ORDER BY {column} LIMIT {self.limit}"
        params = [self.last[table]] if where else []
        try:
            cursor = self.db.execute(sql, params)
            names = [d[0] for d in cursor.description]
            rows = cursor.fetchall()
            self.db.rollback()  # end the read transaction: the next poll sees new rows
        except Exception as exc:  # both drivers' errors: the database refused
            raise ConnectException(f"Reading {table} failed: {exc}") from exc
        records = []
        for row in rows:
            value = dict(zip(names, row, strict=True))
            self.last[table] = value[self.column]
            schema = Schema("struct", name=table, fields=tuple(
                (n, Schema(_schema_type(v), optional=True)) for n, v in value.items()))
            records.append(SourceRecord({"table": table}, {self.offset_key: self.last[table]},
                                        self.prefix + table, value, schema))
        return records

    def stop(self) -> None:
        self.db.close()


def _schema_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, bytes | bytearray | memoryview):
        return "bytes"
    return "string"
