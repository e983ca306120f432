"""Many rows into one table with one statement run for each (executemany): what the store
writes every cycle.

Django's bulk_create builds a model instance per row and compiles every value of every row
(about 0.4 ms a row on this machine): at 10,000 partitions that alone outlasted the 5 s
interval (bench/controlcenter_bench.py). Here rows are plain dicts keyed by field name;
the values of JSON and datetime columns are adapted by Django's own field code, so the
database receives what bulk_create would have sent, and the rest go to the driver as they
are. `INSERT ... ON CONFLICT (...) DO UPDATE` is the same SQL on SQLite (3.24 and later)
and PostgreSQL, the two databases the platform runs on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from django.db import connections, models

Adapt = Callable[[Any], Any]


def insert(model: type[models.Model], rows: Sequence[Mapping[str, Any]], using: str, *,
           unique: Sequence[str] = ()) -> None:
    """Insert `rows` (every row with the same fields); with `unique`, a row whose unique
    fields exist already updates that row's other fields instead."""
    if not rows:
        return
    names = list(rows[0])
    connection = connections[using]
    quote = connection.ops.quote_name
    fields = [_field(model, name) for name in names]
    columns = [quote(_column(f)) for f in fields]
    sql = (f"INSERT INTO {quote(model._meta.db_table)} ({', '.join(columns)}) "
           f"VALUES ({', '.join(['%s'] * len(columns))})")
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
    connection = connections[using]
    quote = connection.ops.quote_name
    fields = [_field(model, name) for name in names]
    sets = ", ".join(f"{quote(_column(f))} = %s" for f in fields)
    pk = _field(model, "pk")
    sql = f"UPDATE {quote(model._meta.db_table)} SET {sets} WHERE {quote(_column(pk))} = %s"
    _run(using, sql, [*names, "pk"], [*fields, pk], rows)


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
    params = [[value if adapt is None else adapt(value)
               for adapt, value in zip(adapters, (row[n] for n in names), strict=True)]
              for row in rows]
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)


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
