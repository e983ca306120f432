"""The registry converters' mappings without a registry: Connect schemas to Avro, JSON Schema
and Protobuf and back (Hypothesis: any struct of the types Connect has), values through
each format's own library, and Protobuf's message indexes; Connect's logical types through
Kafka's JSON envelope (both decimal formats), Avro and Protobuf."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
from typing import Any

import fastavro
import jsonschema  # type: ignore[import-untyped]
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from hypothesis import given, settings
from hypothesis import strategies as st

from connect import logical
from connect.api import DataException, Schema
from connect.converters import converter_class
from connect.converters.avro import AvroConverter, from_avro, to_avro
from connect.converters.jsonschema import from_json_schema, to_json_schema, to_json_value
from connect.converters.protobuf import (
    ProtobufConverter,
    file_for,
    fill,
    message_indexes,
    read,
    read_indexes,
    to_connect_schema,
)

PRIMITIVES = ["int8", "int16", "int32", "int64", "float32", "float64", "boolean", "string",
              "bytes"]
NAMES = st.text("abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8)


def _value(schema: Schema, draw: Any) -> Any:
    kind = schema.type
    if kind == "struct":
        return {n: _value(s, draw) for n, s in schema.fields}
    if kind == "array":
        return [_value(schema.items or Schema("string"), draw) for _ in range(draw(
            st.integers(0, 2)))]
    bounds = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}
    if kind in bounds:
        return draw(st.integers(-(2 ** bounds[kind]), 2 ** bounds[kind] - 1))
    return {"float32": 0.5, "float64": draw(st.floats(allow_nan=False, allow_infinity=False,
                                                       width=64)),
            "boolean": draw(st.booleans()), "string": draw(st.text(max_size=5)),
            "bytes": draw(st.binary(max_size=5))}[kind]


@st.composite
def structs(draw: Any, depth: int = 0, name: str = "Top") -> Schema:
    names = draw(st.lists(NAMES, min_size=1, max_size=4, unique=True))
    fields = []
    for n in names:
        kind = draw(st.sampled_from(PRIMITIVES + (["struct", "array"] if depth < 1 else [])))
        if kind == "struct":
            sub = draw(structs(depth + 1, f"ns.N{n}"))
        elif kind == "array":
            sub = Schema("array", items=Schema(draw(st.sampled_from(PRIMITIVES))))
        else:
            sub = Schema(kind)
        fields.append((n, sub))
    return Schema("struct", name=f"ns.{name}", fields=tuple(fields))


@given(st.data())
def test_avro_keeps_the_connect_schema_and_the_value(data: Any) -> None:
    schema = data.draw(structs())
    value = _value(schema, data.draw)
    avro = to_avro(schema)
    assert from_avro(json.loads(json.dumps(avro))) == schema
    parsed = fastavro.parse_schema(avro)
    out = io.BytesIO()
    fastavro.schemaless_writer(out, parsed, value)
    back = fastavro.schemaless_reader(io.BytesIO(out.getvalue()), parsed, None)
    assert back == value


@given(st.data())
def test_json_schema_keeps_the_connect_schema_and_validates_the_value(data: Any) -> None:
    schema = data.draw(structs())
    document = to_json_schema(schema)
    assert from_json_schema(document) == schema
    jsonschema.Draft7Validator.check_schema(document)
    jsonschema.Draft7Validator(document).validate(to_json_value(schema, _value(schema,
                                                                               data.draw)))


@given(st.data())
def test_protobuf_keeps_field_types_and_values(data: Any) -> None:
    schema = data.draw(structs())
    value = _value(schema, data.draw)
    file = file_for(schema)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(file.SerializeToString()))
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("ns.Top"))
    message = cls()
    fill(message, value)
    back = read(cls.FromString(message.SerializeToString()))
    read_schema = to_connect_schema(cls.DESCRIPTOR)
    widened = {"int8": "int32", "int16": "int32"}
    for (name, original), (read_name, got) in zip(schema.fields, read_schema.fields,
                                                  strict=True):
        assert name == read_name
        assert got.type == widened.get(original.type, original.type)
    assert back == value


@given(st.lists(st.integers(0, 300), min_size=1, max_size=5))
def test_message_indexes_round_trip(indexes: list[int]) -> None:
    encoded = message_indexes(indexes)
    assert read_indexes(encoded + b"rest") == (indexes, len(encoded))
    if indexes == [0]:
        assert encoded == b"\0"  # Confluent's short form for the first message


def test_confluents_class_names_and_short_names_find_the_converters() -> None:
    assert converter_class("io.confluent.connect.avro.AvroConverter") is AvroConverter
    assert converter_class("AvroConverter") is AvroConverter
    assert converter_class("ProtobufConverter").__name__ == "ProtobufConverter"
    assert converter_class("JsonSchemaConverter").__name__ == "JsonSchemaConverter"


def test_bad_settings_and_bad_bytes_are_refused_in_confluents_words() -> None:
    from connect.configdef import ConfigException

    converter = AvroConverter()
    with pytest.raises(ConfigException, match=r"schema\.registry\.url"):
        converter.configure({}, False)
    with pytest.raises(ConfigException, match=r"value\.subject\.name\.strategy"):
        converter.configure({"schema.registry.url": "http://127.0.0.1:1",
                             "value.subject.name.strategy": "NoSuchStrategy"}, False)
    converter.configure({"schema.registry.url": "http://127.0.0.1:1"}, False)
    with pytest.raises(DataException, match="Unknown magic byte"):
        converter.to_connect_data("t", b"\x01\x00\x00\x00\x01x")
    with pytest.raises(DataException, match="needs a schema"):
        converter.from_connect_data("t", None, {"a": 1})
    assert converter.from_connect_data("t", None, None) is None  # tombstones stay null


@settings(max_examples=40)  # five codecs per example
@given(st.decimals(allow_nan=False, allow_infinity=False, places=3,
                   min_value=-(10 ** 30), max_value=10 ** 30), st.dates(),
       st.times().map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000)),
       st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1))
       .map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000, tzinfo=dt.UTC)))
def test_logical_types_round_trip_through_kafkas_json_envelope_avro_and_protobuf(
        amount: decimal.Decimal, day: dt.date, at: dt.time, ts: dt.datetime) -> None:
    schema = Schema("struct", name="ns.Logical", fields=(
        ("amount", logical.decimal_schema(3)), ("day", logical.date_schema()),
        ("at", logical.time_schema()), ("ts", logical.timestamp_schema(optional=True))))
    value = {"amount": amount, "day": day, "at": at, "ts": ts}
    for decimal_format in ("BASE64", "NUMERIC"):
        converter = converter_class("JsonConverter")()
        converter.configure({"decimal.format": decimal_format}, False)
        assert converter.to_connect_data("t", converter.from_connect_data("t", schema, value)
                                         ) == (schema, value)
    avro = to_avro(schema)
    assert from_avro(json.loads(json.dumps(avro))) == schema
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(avro), value)
    assert fastavro.schemaless_reader(io.BytesIO(out.getvalue()), fastavro.parse_schema(avro),
                                      None) == value
    # Protobuf: confluent.type.Decimal (scale in the field's options), google.type.Date and
    # TimeOfDay, google.protobuf.Timestamp, built with their imports as the converter does.
    converter = ProtobufConverter()
    converter.configure({"schema.registry.url": "http://127.0.0.1:1"}, False)
    cls = converter._class(file_for(schema), [0])
    message = cls()
    fill(message, value)
    assert read(cls.FromString(message.SerializeToString())) == value
    assert to_connect_schema(cls.DESCRIPTOR).fields == tuple(
        (name, Schema(field.type, True, field.name, version=1, parameters=field.parameters))
        for name, field in schema.fields)


def test_kafkas_json_envelope_of_a_decimal_reads_and_writes_as_kafka_writes_it() -> None:
    kafka = (b'{"schema":{"type":"bytes","optional":false,'
             b'"name":"org.apache.kafka.connect.data.Decimal","version":1,'
             b'"parameters":{"scale":"2"}},"payload":"MDk="}')  # 12345 at scale 2
    converter = converter_class("org.apache.kafka.connect.json.JsonConverter")()
    converter.configure({}, False)
    schema, value = converter.to_connect_data("t", kafka)
    assert (schema, value) == (logical.decimal_schema(2), decimal.Decimal("123.45"))
    assert converter.from_connect_data("t", schema, value) == kafka
    with pytest.raises(DataException, match="scale of 3"):
        converter.from_connect_data("t", schema, decimal.Decimal("1.234"))
    date = b'{"schema":{"type":"int32","optional":false,"name":"org.apache.kafka.connect.data.Date","version":1},"payload":-1}'  # noqa: E501
    assert converter.to_connect_data("t", date)[1] == dt.date(1969, 12, 31)


def test_protobufs_well_known_date_time_and_timestamp_read_as_connects_logical_types() -> None:
    from google.protobuf import timestamp_pb2
    from google.type import date_pb2, timeofday_pb2

    file = descriptor_pb2.FileDescriptorProto(
        name="shop/payment.proto", package="shop", syntax="proto3",
        dependency=["google/type/date.proto", "google/type/timeofday.proto",
                    "google/protobuf/timestamp.proto"])
    message = file.message_type.add(name="Payment")
    for number, (name, type_name) in enumerate((
            ("day", ".google.type.Date"), ("at", ".google.type.TimeOfDay"),
            ("ts", ".google.protobuf.Timestamp"), ("unset", ".google.protobuf.Timestamp")), 1):
        message.field.add(name=name, number=number, type_name=type_name,
                          type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
                          label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    for known in (date_pb2, timeofday_pb2, timestamp_pb2):
        pool.Add(descriptor_pb2.FileDescriptorProto.FromString(
            known.DESCRIPTOR.serialized_pb))
    pool.Add(file)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Payment"))
    payment: Any = cls()  # a message class built at run time: fields unknown to mypy
    payment.day.year, payment.day.month, payment.day.day = 2024, 2, 29
    payment.at.hours, payment.at.minutes, payment.at.seconds = 23, 59, 58
    payment.at.nanos = 999_000_000
    payment.ts.seconds, payment.ts.nanos = 1_709_209_801, 250_000_000
    back = cls.FromString(payment.SerializeToString())
    assert dict(to_connect_schema(cls.DESCRIPTOR).fields) == {
        "day": logical.date_schema(optional=True), "at": logical.time_schema(optional=True),
        "ts": logical.timestamp_schema(optional=True),
        "unset": logical.timestamp_schema(optional=True)}
    assert read(back) == {"day": dt.date(2024, 2, 29), "at": dt.time(23, 59, 58, 999000),
                          "ts": dt.datetime(2024, 2, 29, 12, 30, 1, 250000, tzinfo=dt.UTC),
                          "unset": None}
