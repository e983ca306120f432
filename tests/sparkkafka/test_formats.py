"""JSON Schema and Protobuf values decoded to typed columns through a real registry, bad
records under FAILFAST and PERMISSIVE, and Avro, JSON Schema and Protobuf values encoded by
the helpers, written through the sink and read back by confluent-kafka's own deserializers."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pool, message_factory

from registry.protobuf import compiler
from sparkkafka import formats
from tests.sparkkafka.topics import create_topic, produce

ORDER_JSON = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order",
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "amount": {"type": "number"},
        "paid": {"type": "boolean"},
        "at": {"type": "string", "format": "date-time"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "customer": {"$ref": "#/definitions/customer"},
        "note": {"type": ["string", "null"]},
    },
    "required": ["id", "customer"],
    "definitions": {
        "customer": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "vip": {"type": "boolean"}},
            "required": ["name"],
        }
    },
}
PROTO_ADDRESS = 'syntax = "proto3";\npackage mill.common;\nmessage Address { string street = 1; }\n'
PROTO_ORDER = """syntax = "proto3";
package mill.shop;
import "mill/common/address.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
message Ignored { int32 first = 1; }
message Order {
  enum State { NEW = 0; PAID = 1; }
  message Line { string sku = 1; int32 count = 2; }
  string id = 1;
  mill.common.Address ship_to = 2;
  google.protobuf.Timestamp at = 3;
  repeated int64 quantities = 4;
  map<string, string> tags = 5;
  State state = 6;
  repeated Line lines = 7;
  optional double discount = 8;
  google.protobuf.StringValue coupon = 9;
  uint64 big = 10;
}
"""


def context(topic: str) -> SerializationContext:
    return SerializationContext(topic, MessageField.VALUE)


def decoded(spark: Any, bootstrap: str, topic: str, column: Any) -> list[Any]:
    df = (
        spark.read.format("millrace-kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
    )
    rows: list[Any] = df.orderBy("offset").select(column.alias("v")).collect()
    return [r.v for r in rows]


def test_json_schema_values_decode_to_typed_columns(
    spark: Any, kafka_bootstrap: str, schema_registry: str
) -> None:
    topic = create_topic(kafka_bootstrap, 1)
    client = SchemaRegistryClient({"url": schema_registry})
    serialize = JSONSerializer(json.dumps(ORDER_JSON), client)
    values = [
        {
            "id": 1,
            "amount": 9.5,
            "paid": True,
            "at": "2026-01-02T03:04:05+00:00",
            "tags": ["a", "b"],
            "customer": {"name": "Ada", "vip": True},
            "note": None,
        },
        {"id": 2, "customer": {"name": "Bo"}},
    ]
    produce(kafka_bootstrap, topic, [(0, None, serialize(v, context(topic)), None) for v in values])
    subject = f"{topic}-value"
    assert formats.value_type(schema_registry, subject).simpleString() == (
        "struct<id:bigint,amount:double,paid:boolean,at:timestamp,tags:array<string>,"
        "customer:struct<name:string,vip:boolean>,note:string>"
    )
    column = formats.from_json_schema("value", subject, schema_registry)
    rows = decoded(spark, kafka_bootstrap, topic, column)
    at = datetime(2026, 1, 2, 3, 4, 5)  # Spark gives session-local (UTC here) naive datetimes
    assert [r.asDict(recursive=True) for r in rows] == [
        {
            "id": 1,
            "amount": 9.5,
            "paid": True,
            "at": at,
            "tags": ["a", "b"],
            "customer": {"name": "Ada", "vip": True},
            "note": None,
        },
        {
            "id": 2,
            "amount": None,
            "paid": None,
            "at": None,
            "tags": None,
            "customer": {"name": "Bo", "vip": None},
            "note": None,
        },
    ]


def test_bad_records_fail_the_query_or_are_null_when_permissive(
    spark: Any, kafka_bootstrap: str, schema_registry: str
) -> None:
    topic = create_topic(kafka_bootstrap, 1)
    client = SchemaRegistryClient({"url": schema_registry})
    good = JSONSerializer(json.dumps(ORDER_JSON), client)(
        {"id": 7, "customer": {"name": "C"}}, context(topic)
    )
    other_topic = f"other-{uuid.uuid4().hex[:8]}"
    other = JSONSerializer('{"type": "string"}', client)("x", context(other_topic))
    wrong_type = good[:5] + b'{"id": "seven", "customer": {"name": "C"}}'
    records = [good, b"plain text", other, wrong_type, good[:5] + b"{not json"]
    produce(kafka_bootstrap, topic, [(0, None, v, None) for v in records])
    subject = f"{topic}-value"
    permissive = formats.decode_column("value", subject, schema_registry, mode="PERMISSIVE")
    rows = decoded(spark, kafka_bootstrap, topic, permissive)
    assert [None if r is None else r.id for r in rows] == [7, None, None, None, None]
    # By schema id: only records written with exactly that id.
    writer_id = int.from_bytes(good[1:5], "big")
    by_id = formats.decode_column(
        "value", None, schema_registry, schema_id=writer_id, mode="permissive"
    )
    rows = decoded(spark, kafka_bootstrap, topic, by_id)
    assert [None if r is None else r.id for r in rows] == [7, None, None, None, None]
    # The Data Source with valueFormat=jsonschema and Spark's mode option.
    df = (
        spark.read.format("millrace-kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", topic)
        .option("valueFormat", "jsonschema")
        .option("mode", "PERMISSIVE")
        .option("schema.registry.url", schema_registry)
        .load()
    )
    values = [r.value for r in df.orderBy("offset").collect()]
    assert [None if v is None else v.id for v in values] == [7, None, None, None, None]
    failfast = formats.from_json_schema("value", subject, schema_registry)
    with pytest.raises(Exception, match="not the Confluent wire format"):
        decoded(spark, kafka_bootstrap, topic, failfast)
    with pytest.raises(formats.SchemaError, match="not PROTOBUF"):
        formats.from_protobuf("value", subject, schema_registry)
    with pytest.raises(formats.SchemaError, match="FAILFAST or PERMISSIVE"):
        formats.decode_column("value", subject, schema_registry, mode="DROPMALFORMED")


@pytest.fixture(scope="module")
def order_class() -> type[Any]:
    """A generated-style message class for PROTO_ORDER, in a pool of its own."""
    order, dependencies = compiler.compile_text(
        PROTO_ORDER, {"mill/common/address.proto": PROTO_ADDRESS}
    )
    order.name = "mill/shop/order.proto"
    pool = descriptor_pool.DescriptorPool()
    for file in [*dependencies, order]:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("mill.shop.Order"))


def test_protobuf_values_decode_to_a_struct_following_the_descriptor(
    spark: Any, kafka_bootstrap: str, schema_registry: str, order_class: type[Any]
) -> None:
    topic = create_topic(kafka_bootstrap, 1)
    client = SchemaRegistryClient({"url": schema_registry})
    serialize = ProtobufSerializer(order_class, client, {"use.deprecated.format": False})
    first = order_class(id="o-1", quantities=[3, 2**40], tags={"rush": "yes"}, state=1)
    first.ship_to.street = "1 Mill Lane"
    first.at.seconds = 1_700_000_000
    first.lines.add(sku="nut", count=4)
    first.discount = 0.5
    first.coupon.value = "WELCOME"
    first.big = 2**64 - 1
    second = order_class(id="o-2")
    values = [serialize(m, context(topic)) for m in (first, second)]
    assert values[0][5] != 0  # message indexes [1]: Order is the file's second message
    produce(kafka_bootstrap, topic, [(0, None, v, None) for v in values])
    subject = f"{topic}-value"
    kind = formats.value_type(schema_registry, subject, message="mill.shop.Order")
    assert kind.simpleString() == (
        "struct<id:string,ship_to:struct<street:string>,at:timestamp,quantities:array<bigint>,"
        "tags:map<string,string>,state:string,lines:array<struct<sku:string,count:int>>,"
        "discount:double,coupon:string,big:decimal(20,0)>"
    )
    column = formats.from_protobuf("value", subject, schema_registry, message="mill.shop.Order")
    rows = [r.asDict(recursive=True) for r in decoded(spark, kafka_bootstrap, topic, column)]
    assert rows == [
        {
            "id": "o-1",
            "ship_to": {"street": "1 Mill Lane"},
            "at": datetime.fromtimestamp(1_700_000_000, UTC).replace(tzinfo=None),
            "quantities": [3, 2**40],
            "tags": {"rush": "yes"},
            "state": "PAID",
            "lines": [{"sku": "nut", "count": 4}],
            "discount": 0.5,
            "coupon": "WELCOME",
            "big": Decimal(2**64 - 1),
        },
        {
            "id": "o-2",
            "ship_to": None,
            "at": None,
            "quantities": [],
            "tags": {},
            "state": "NEW",
            "lines": [],
            "discount": None,
            "coupon": None,
            "big": Decimal(0),
        },
    ]
    # The Data Source decodes the same with valueFormat=protobuf.
    df = (
        spark.read.format("millrace-kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", topic)
        .option("valueFormat", "protobuf")
        .option("valueProtobufMessage", "mill.shop.Order")
        .option("schema.registry.url", schema_registry)
        .load()
    )
    assert df.schema["value"].dataType == kind
    by_source = [r.value.asDict(recursive=True) for r in df.orderBy("offset").collect()]
    assert by_source == rows
    # The file's first message is the default reader: Order records are not Ignored ones.
    ignored = formats.from_protobuf("value", subject, schema_registry, mode="PERMISSIVE")
    assert decoded(spark, kafka_bootstrap, topic, ignored) == [None, None]


def read_back(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": topic, "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        while len(values) < count:
            message = consumer.poll(10)
            assert message is not None, "no record from the broker"
            assert message.error() is None, message.error()
            values.append(message.value())
    finally:
        consumer.close()
    return values


def write(df: Any, bootstrap: str, topic: str) -> None:
    (
        df.write.format("millrace-kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .mode("append")
        .save()
    )


def test_encoded_values_written_by_the_sink_read_with_confluent_deserializers(
    spark: Any, kafka_bootstrap: str, schema_registry: str, order_class: type[Any]
) -> None:
    client = SchemaRegistryClient({"url": schema_registry})
    df = spark.createDataFrame(
        [(1, "Ada", 9.5, ["a"]), (2, "Bo", None, [])],
        "id BIGINT NOT NULL, name STRING NOT NULL, amount DOUBLE, tags ARRAY<STRING>",
    )
    row = df.selectExpr("struct(*) AS row").schema["row"].dataType
    expected = [
        {"id": 1, "name": "Ada", "amount": 9.5, "tags": ["a"]},
        {"id": 2, "name": "Bo", "amount": None, "tags": []},
    ]
    # Avro, with a schema derived from the frame, registered on first use.
    topic = create_topic(kafka_bootstrap, 1)
    avro = formats.to_avro(
        "row", f"{topic}-value", schema_registry, schema=formats.schema_for("AVRO", row, "Row")
    )
    write(
        df.selectExpr("CAST(id AS STRING) AS key", "struct(*) AS row").select(
            "key", avro.alias("value")
        ),
        kafka_bootstrap,
        topic,
    )
    read = read_back(kafka_bootstrap, topic, 2)
    deserialize = AvroDeserializer(client)
    assert sorted((deserialize(v, context(topic)) for v in read), key=lambda v: v["id"]) == expected
    # JSON Schema: the derived schema, validated on write.
    topic = create_topic(kafka_bootstrap, 1)
    schema = formats.schema_for("JSON", row, "Row")
    as_json = formats.to_json_schema("row", f"{topic}-value", schema_registry, schema=schema)
    write(df.selectExpr("struct(*) AS row").select(as_json.alias("value")), kafka_bootstrap, topic)
    read = read_back(kafka_bootstrap, topic, 2)
    deserialize_json = JSONDeserializer(None, schema_registry_client=client)
    got = [deserialize_json(v, context(topic)) for v in read]
    assert sorted(got, key=lambda v: v["id"]) == expected
    # Protobuf: the schema a ProtobufSerializer registered, reused by id; message indexes [1].
    topic = create_topic(kafka_bootstrap, 1)
    registered = ProtobufSerializer(order_class, client, {"use.deprecated.format": False})(
        order_class(id="seed"), context(topic)
    )
    orders = spark.createDataFrame(
        [("o-9", "1 Mill Lane", datetime(2026, 1, 2, tzinfo=UTC), [5], {"k": "v"}, "PAID")],
        "id STRING, street STRING, at TIMESTAMP, quantities ARRAY<BIGINT>, "
        "tags MAP<STRING, STRING>, state STRING",
    ).selectExpr(
        "named_struct('id', id, 'ship_to', named_struct('street', street), 'at', at, "
        "'quantities', quantities, 'tags', tags, 'state', state) AS row"
    )
    proto = formats.to_protobuf(
        "row",
        None,
        schema_registry,
        schema_id=int.from_bytes(registered[1:5], "big"),
        message="mill.shop.Order",
    )
    write(orders.select(proto.alias("value")), kafka_bootstrap, topic)
    read = read_back(kafka_bootstrap, topic, 1)
    assert read[0][:6] == registered[:6]
    message = ProtobufDeserializer(order_class, {"use.deprecated.format": False})(
        read[0], context(topic)
    )
    assert (message.id, message.ship_to.street, message.at.seconds) == (
        "o-9",
        "1 Mill Lane",
        int(datetime(2026, 1, 2, tzinfo=UTC).timestamp()),
    )
    assert (list(message.quantities), dict(message.tags), message.state) == ([5], {"k": "v"}, 1)


def test_a_value_that_does_not_match_the_json_schema_fails_the_write(
    spark: Any, kafka_bootstrap: str, schema_registry: str
) -> None:
    topic = create_topic(kafka_bootstrap, 1)
    schema = json.dumps({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}})
    df = spark.createDataFrame([(-1,)], "n BIGINT").selectExpr("struct(*) AS row")
    column = formats.to_json_schema("row", f"{topic}-value", schema_registry, schema=schema)
    with pytest.raises(Exception, match="does not match the JSON Schema at n"):
        write(df.select(column.alias("value")), kafka_bootstrap, topic)
    assert (
        SchemaRegistryClient({"url": schema_registry})
        .get_latest_version(f"{topic}-value")
        .schema.schema_type
        == "JSON"
    )


def test_a_protobuf_schema_derived_from_a_frame_round_trips(
    spark: Any, schema_registry: str
) -> None:
    df = spark.createDataFrame(
        [(1, "a", None, [1.5], {"x": 1}), (2, None, 3, [], {})],
        "id BIGINT NOT NULL, name STRING, n INT, xs ARRAY<DOUBLE>, m MAP<STRING, BIGINT>",
    ).selectExpr("struct(id, name, n, xs, m, named_struct('deep', name) AS inner) AS row")
    kind = df.schema["row"].dataType
    subject = f"derived-{uuid.uuid4().hex[:8]}"
    text = formats.schema_for("PROTOBUF", kind, "Row")
    encoded = df.select(
        formats.to_protobuf("row", subject, schema_registry, schema=text).alias("b")
    )
    rows = encoded.select(formats.from_protobuf("b", subject, schema_registry).alias("r"))
    got = sorted((r.r.asDict(recursive=True) for r in rows.collect()), key=lambda r: r["id"])
    # The id is settled on the driver: registered above, then looked up, or the latest.
    registered = formats.writer_schema(schema_registry, subject, "PROTOBUF", schema=text)
    looked_up = formats.writer_schema(
        schema_registry, subject, "PROTOBUF", schema=text, auto_register=False
    )
    latest = formats.writer_schema(schema_registry, subject, "PROTOBUF")
    assert registered.id == looked_up.id == latest.id
    with pytest.raises(formats.SchemaError, match="404"):
        formats.writer_schema(
            schema_registry, subject, "PROTOBUF", schema=text + "message Other {}\n",
            auto_register=False,
        )  # fmt: skip
    with pytest.raises(formats.SchemaError, match="not AVRO"):
        formats.writer_schema(schema_registry, subject, "AVRO")
    assert got == [
        {"id": 1, "name": "a", "n": None, "xs": [1.5], "m": {"x": 1}, "inner": {"deep": "a"}},
        {"id": 2, "name": None, "n": 3, "xs": [], "m": {}, "inner": {"deep": None}},
    ]
