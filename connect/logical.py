"""Kafka Connect's logical types (`org.apache.kafka.connect.data`): a named schema over a
primitive, whose values a connector sees as Python's own types.

`org.apache.kafka.connect.data.` + name: schema, what the bytes hold, a connector's value
- `Decimal`: bytes with the parameter `scale`; the unscaled number, big-endian two's
  complement in the fewest bytes; `decimal.Decimal`
- `Date`: int32; days since 1970-01-01; `datetime.date`
- `Time`: int32; milliseconds since midnight; `datetime.time`
- `Timestamp`: int64; milliseconds since the epoch; `datetime.datetime` in UTC

Each has version 1, as Kafka's builders set it. The converters turn the primitive into the
Python value when they read, and back when they write (`to_primitive`, `from_primitive`);
a connector may also hand them the primitive itself (an int for a Date), as Kafka's
converters take a `java.util.Date` only.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import re
from typing import Any

from connect.api import DataException, Schema

DECIMAL = "org.apache.kafka.connect.data.Decimal"
DATE = "org.apache.kafka.connect.data.Date"
TIME = "org.apache.kafka.connect.data.Time"
TIMESTAMP = "org.apache.kafka.connect.data.Timestamp"
PRIMITIVE = {DECIMAL: "bytes", DATE: "int32", TIME: "int32", TIMESTAMP: "int64"}
SCALE = "scale"
EPOCH = dt.date(1970, 1, 1)
EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
MS = dt.timedelta(milliseconds=1)


def decimal_schema(scale: int, optional: bool = False,
                   extra: tuple[tuple[str, str], ...] = ()) -> Schema:
    return Schema("bytes", optional, DECIMAL, version=1,
                  parameters=((SCALE, str(scale)), *extra))


def date_schema(optional: bool = False) -> Schema:
    return Schema("int32", optional, DATE, version=1)


def time_schema(optional: bool = False) -> Schema:
    return Schema("int32", optional, TIME, version=1)


def timestamp_schema(optional: bool = False) -> Schema:
    return Schema("int64", optional, TIMESTAMP, version=1)


def is_logical(schema: Schema | None) -> bool:
    return schema is not None and schema.name in PRIMITIVE


def scale_of(schema: Schema) -> int:
    found = dict(schema.parameters).get(SCALE)
    if found is None:
        raise DataException("Invalid Decimal schema: scale parameter not found.")
    return int(found)


def unscaled(value: decimal.Decimal, scale: int) -> int:
    """The integer a Decimal of `scale` stands for (123.45 at scale 2 is 12345); a value
    with more digits after the point than the scale is refused, as Kafka's BigDecimal."""
    sign, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        raise DataException(f"Decimal {value} is not a finite number")
    if -exponent > scale:
        raise DataException(f"Decimal {value} has a scale of {-exponent}, more than the "
                            f"schema's {scale}")
    number: int = int("".join(map(str, digits)) or "0") * 10 ** (scale + exponent)
    return -number if sign else number


def decimal_bytes(value: decimal.Decimal, scale: int) -> bytes:
    number = unscaled(value, scale)
    length = (number + (number < 0)).bit_length() // 8 + 1  # room for the sign bit
    return number.to_bytes(length, "big", signed=True)


def scaled(number: int, scale: int) -> decimal.Decimal:
    """The Decimal `number` stands for at `scale`, built from its digits: exact at any
    length (arithmetic would round to the context's 28 digits)."""
    return decimal.Decimal((number < 0, tuple(map(int, str(abs(number)))), -scale))


def bytes_decimal(data: bytes, scale: int) -> decimal.Decimal:
    return scaled(int.from_bytes(data, "big", signed=True), scale)


def to_primitive(schema: Schema, value: Any) -> Any:
    """A logical value as its primitive: bytes, days, milliseconds."""
    name = schema.name
    if name == DECIMAL:
        if isinstance(value, bytes | bytearray):
            return bytes(value)
        if not isinstance(value, decimal.Decimal | int):
            raise DataException(f"Decimal needs a decimal.Decimal, not {type(value).__name__}")
        return decimal_bytes(decimal.Decimal(value), scale_of(schema))
    if isinstance(value, int) and not isinstance(value, bool):
        return value  # already the primitive
    if name == DATE and isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return (value - EPOCH).days
    if name == TIME and isinstance(value, dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + \
            value.microsecond // 1000
    if name == TIMESTAMP and isinstance(value, dt.datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
        return (aware - EPOCH_UTC) // MS
    raise DataException(f"{name} cannot hold a value of type {type(value).__name__}")


def from_primitive(schema: Schema, value: Any) -> Any:
    """A primitive read from bytes as the logical type's Python value."""
    name = schema.name
    if value is None:
        return None
    if name == DECIMAL:
        if isinstance(value, bytes | bytearray):
            return bytes_decimal(bytes(value), scale_of(schema))
        scale = scale_of(schema)  # a JSON number (Kafka's decimal.format=NUMERIC)
        return scaled(unscaled(decimal.Decimal(str(value)), scale), scale)
    if not isinstance(value, int) or isinstance(value, bool):
        return value  # already the logical value (a format's library converted it)
    if name == DATE:
        return EPOCH + dt.timedelta(days=value)
    if name == TIME:
        return (dt.datetime.min + value * MS).time()
    if name == TIMESTAMP:
        return EPOCH_UTC + value * MS
    return value


class JsonDecimal:
    """A Decimal that `json_dumps` writes as a JSON number with all its digits (the
    standard library's json has no such number; a float would round it)."""
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = decimal.Decimal(value)
        if not self.value.is_finite():
            raise DataException(f"Decimal {value} is not a finite number")


_MARK = "\x00decimal:"


def _mark(value: Any) -> str:
    if isinstance(value, JsonDecimal):
        return _MARK + str(value.value)
    if isinstance(value, decimal.Decimal) and value.is_finite():
        return _MARK + str(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def json_dumps(document: Any) -> str:
    """Compact JSON in which Decimals (and JsonDecimals) are numbers, digit for digit."""
    text = json.dumps(document, separators=(",", ":"), default=_mark)
    if "\\u0000decimal:" not in text:
        return text
    return re.sub(r'"\\u0000decimal:([-+0-9.Ee]+)"', r"\1", text)
