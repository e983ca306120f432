"""Many rows into one table: what the store writes every cycle.

Django's bulk_create builds a model instance per row and compiles every value of every row
(about 0.4 ms a row on this machine): at 10,000 partitions that alone outlasted the 5 s
interval (bench/controlcenter_bench.py). Here rows are plain dicts keyed by field name;
the values of JSON and datetime columns are adapted by Django's own field code, so the
database receives what bulk_create would have sent, and the rest go to the driver as they
are. `INSERT ... ON CONFLICT (...) DO UPDATE` is the same SQL on SQLite (3.24 and later)
and PostgreSQL, the two databases the platform runs on; only where the rows come from
differs (`_source`): on PostgreSQL a batch is one statement over `unnest` of one array
per column, on SQLite one VALUES statement run for each row (executemany).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import psycopg
from django.db import connections, models

Adapt = Callable[[Any], Any]
PG_BATCH = 5000  # rows in one unnest statement: bounded statements, few round trips


def insert(model: type[models.Model], rows: Sequence[Mapping[str, Any]], using: str, *,
           unique: Sequence[str] = ()) -> None:
    """Insert `rows` (every row with the same fields); with `unique`, a row whose unique
    fields exist already updates that row's other fields instead."""
    if not rows:
        return
    names = list(rows[0])
    quote = connections[using].ops.quote_name
    fields = [_field(model, name) for name in names]
    columns = [quote(_column(f)) for f in fields]
    source = _source(using, fields)
    sql = f"INSERT INTO {quote(model._meta.db_table)} ({', '.join(columns)}) {source}"
    if unique:
        keys = [quote(_column(_field(model, n))) for n in unique]
        sets = [f"{c} = excluded.{c}" for c in columns if c not in keys]
        sql += f" ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {', '.join(sets)}"
    _run(using, sql, names, fields, rows)


def update(model: type[models.Model], rows: Sequence[Mapping[str, Any]], using: str) -> None:
    """Set the fields of each row (every row with the same fields) on the row with its `pk`."""
    if not rows:
        return
    names = [n for n in rows[0] if n != "pk"]
    quote = connections[using].ops.quote_name
    fields = [_field(model, name) for name in names]
    pk = _field(model, "pk")
    table = quote(model._meta.db_table)
    if connections[using].vendor == "postgresql":
        given = ", ".join(quote(f"v{i}") for i in range(len(fields) + 1))
        sets = ", ".join(f"{quote(_column(f))} = v.{quote(f'v{i}')}"
                         for i, f in enumerate(fields))
        sql = (f"UPDATE {table} SET {sets} FROM ({_source(using, [*fields, pk])}) "
               f"AS v({given}) WHERE {table}.{quote(_column(pk))} = v.{quote(f'v{len(fields)}')}")
    else:
        sets = ", ".join(f"{quote(_column(f))} = %s" for f in fields)
        sql = f"UPDATE {table} SET {sets} WHERE {quote(_column(pk))} = %s"
    _run(using, sql, [*names, "pk"], [*fields, pk], rows)


def _source(using: str, fields: Sequence[models.Field[Any, Any]]) -> str:
    """Where the rows come from: on PostgreSQL one array per column through unnest, so a
    batch is ONE statement (executemany there sends a statement per row, each parsed and
    planned by the server: 8 s for the 40,000 rows of a first cycle, against 0.4 s on
    SQLite), each array a binary parameter (`%b`, `_run_postgresql`); on SQLite one VALUES
    row run for each row, which costs no round trips."""
    connection = connections[using]
    if connection.vendor == "postgresql":
        arrays = ", ".join(f"%b::{f.db_type(connection)}[]" for f in fields)
        return f"SELECT * FROM unnest({arrays})"
    return f"VALUES ({', '.join(['%s'] * len(fields))})"


def _field(model: type[models.Model], name: str) -> models.Field[Any, Any]:
    if name == "pk":
        assert model._meta.pk is not None
        return model._meta.pk
    return cast("models.Field[Any, Any]", model._meta.get_field(name))


def _column(field: models.Field[Any, Any]) -> str:
    assert field.column is not None
    return field.column


def _run(using: str, sql: str, names: list[str], fields: list[models.Field[Any, Any]],
         rows: Sequence[Mapping[str, Any]]) -> None:
    connection = connections[using]
    adapters = [_adapter(field, connection) for field in fields]
    if connection.vendor == "postgresql":
        _run_postgresql(connection, sql, _columns(names, adapters, rows))
        return
    params = [[value if adapt is None else adapt(value)
               for adapt, value in zip(adapters, (row[n] for n in names), strict=True)]
              for row in rows]
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)


def _columns(names: list[str], adapters: list[Adapt | None],
             rows: Sequence[Mapping[str, Any]]) -> list[list[Any]]:
    """One list per column, adapted: what the `unnest` arrays are made of."""
    columns = []
    for name, adapt in zip(names, adapters, strict=True):
        column = [row[name] for row in rows]
        columns.append(column if adapt is None else [adapt(value) for value in column])
    return columns


def _run_postgresql(connection: Any, sql: str, columns: list[list[Any]]) -> None:
    """The arrays go as binary parameters of a server-side-binding cursor. Django's cursors
    bind on the client: psycopg quotes every array element into the SQL text (a regex per
    element, then the server parses it back), which was most of the collector's own time
    in a PostgreSQL write (bench/README.md, collector_db_bench.py, fourth round)."""
    connection.ensure_connection()
    total = len(columns[0])
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        for i in range(0, total, PG_BATCH):  # columns of one batch as arrays
            cursor.execute(sql, [column[i:i + PG_BATCH] for column in columns])


def _adapter(field: models.Field[Any, Any], connection: Any) -> Adapt | None:
    """Django's conversion for the columns that need one; None: the driver takes the value."""
    if field.get_internal_type() not in ("JSONField", "DateTimeField"):
        return None
    seen: dict[Any, Any] = {}  # a cycle writes one timestamp into every row: adapt it once

    def adapt(value: Any) -> Any:
        if isinstance(value, (list, dict)):
            return field.get_db_prep_save(value, connection)
        if value not in seen:
            seen[value] = field.get_db_prep_save(value, connection)
        return seen[value]

    return adapt
