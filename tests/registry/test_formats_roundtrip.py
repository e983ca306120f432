"""confluent-kafka's JSON Schema and Protobuf serializers through our registry and broker.

The clients are unmodified: JSONSerializer registers a schema with a `$ref` to another
subject; ProtobufSerializer registers its imported file as a subject of its own and the
schema as a base64 descriptor, and both deserializers fetch what they need back
(`?format=serialized` for Protobuf).
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from registry.formats import Resolved
from registry.protobuf import compiler, wire
from registry.protobuf import parse as protobuf_parse

ADDRESS_URL = "https://example.com/address.schema.json"
ADDRESS = {"type": "object", "properties": {"street": {"type": "string"},
                                            "city": {"type": "string"}},
           "required": ["street"]}
CUSTOMER = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Customer", "type": "object",
    "properties": {"name": {"type": "string"}, "address": {"$ref": ADDRESS_URL}},
    "required": ["name", "address"],
}
PROTO_ADDRESS = 'syntax = "proto3";\npackage mill.common;\nmessage Address { string street = 1; }\n'
PROTO_ORDER = """syntax = "proto3";
package mill.shop;
import "mill/common/address.proto";
import "google/protobuf/timestamp.proto";
message Ignored { int32 first = 1; }
message Order {
  string id = 1;
  mill.common.Address ship_to = 2;
  google.protobuf.Timestamp at = 3;
  repeated int64 quantities = 4;
  map<string, string> tags = 5;
}
"""


@pytest.fixture(scope="module")
def topic_context(kafka_bootstrap: str) -> Callable[[str], tuple[str, SerializationContext]]:
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})

    def make(prefix: str) -> tuple[str, SerializationContext]:
        topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[
            topic].result(30)
        return topic, SerializationContext(topic, MessageField.VALUE)

    return make


def produce_and_read(bootstrap: str, topic: str, values: list[bytes]) -> list[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, value=value)
    producer.flush(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    read: list[bytes] = []
    try:
        while len(read) < len(values):
            message = consumer.poll(10)
            assert message is not None, "no record from the broker"
            assert message.error() is None, message.error()
            read.append(message.value())
    finally:
        consumer.close()
    return read


def test_json_schema_values_with_a_reference_round_trip(
    live_registry: list[str], kafka_bootstrap: str,
    topic_context: Callable[[str], tuple[str, SerializationContext]],
) -> None:
    topic, context = topic_context("customers")
    registry = SchemaRegistryClient({"url": live_registry[0]})
    registry.register_schema(f"{topic}-address", Schema(json.dumps(ADDRESS), "JSON"))
    reference = SchemaReference(ADDRESS_URL, f"{topic}-address", 1)
    schema = Schema(json.dumps(CUSTOMER), "JSON", [reference])
    serialize = JSONSerializer(schema, registry)
    values = [{"name": "Ada", "address": {"street": "1 Mill Lane"}},
              {"name": "Bo", "address": {"street": "2 Weir Road", "city": "Leeds"}}]
    read = produce_and_read(kafka_bootstrap, topic, [serialize(v, context) for v in values])
    by_writer = JSONDeserializer(None, schema_registry_client=registry)
    assert [by_writer(r, context) for r in read] == values
    assert registry.get_latest_version(f"{topic}-value").schema.schema_type == "JSON"
    # The serializer validates against what it registered, references included.
    with pytest.raises(Exception, match="street"):
        serialize({"name": "Cy", "address": {"city": "York"}}, context)


@pytest.fixture(scope="module")
def order_class() -> type[Any]:
    """A generated-style message class for PROTO_ORDER, in a pool of its own."""
    order, dependencies = compiler.compile_text(PROTO_ORDER, {
        "mill/common/address.proto": PROTO_ADDRESS})
    order.name = "mill/shop/order.proto"
    pool = descriptor_pool.DescriptorPool()
    for file in [*dependencies, order]:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("mill.shop.Order"))


def test_protobuf_messages_with_an_import_round_trip(
    live_registry: list[str], kafka_bootstrap: str, order_class: type[Any],
    topic_context: Callable[[str], tuple[str, SerializationContext]],
) -> None:
    topic, context = topic_context("orders")
    registry = SchemaRegistryClient({"url": live_registry[0]})
    serialize = ProtobufSerializer(order_class, registry, {"use.deprecated.format": False})
    first = order_class(id="o-1", quantities=[3, 2**40], tags={"rush": "yes"})
    first.ship_to.street = "1 Mill Lane"
    first.at.seconds = 1_700_000_000
    second = order_class(id="o-2")
    read = produce_and_read(kafka_bootstrap, topic, [serialize(m, context) for m in (first,
                                                                                     second)])
    # Message index 1: Order is the second message of its file.
    assert read[0][5] != 0
    deserialize = ProtobufDeserializer(order_class, {"use.deprecated.format": False})
    assert [deserialize(r, context) for r in read] == [first, second]
    # The import is a subject of its own, named by its path, and the value refers to it.
    latest = registry.get_latest_version(f"{topic}-value")
    assert latest.schema.schema_type == "PROTOBUF"
    assert [(r.name, r.subject) for r in latest.schema.references] == [
        ("mill/common/address.proto", "mill/common/address.proto")]
    text = registry.get_latest_version("mill/common/address.proto").schema.schema_str
    assert "message Address" in text
    # What a reader without the class fetches: the writer's descriptor, indexes intact.
    written_id = int.from_bytes(read[0][1:5], "big")
    served = registry.get_schema(written_id, fmt="serialized")
    file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(served.schema_str))
    assert [m.name for m in file.message_type] == ["Ignored", "Order"]
    # The registry's own decoding (what the platform's browsers use) reads the same values.
    stored = registry.get_schema(written_id)
    address = protobuf_parse(text, [], False)
    order = protobuf_parse(stored.schema_str, [Resolved(
        "mill/common/address.proto", address, "PROTOBUF")], False)
    indexes, start = wire.read_message_indexes(read[0])
    assert indexes == [1]
    decoded = wire.message_class(order, indexes).FromString(read[0][start:])
    assert decoded.SerializeToString(deterministic=True) == first.SerializeToString(
        deterministic=True)
    assert wire.read_message_indexes(b"\0\0\0\0\1\0") == ([0], 6)


def test_an_incompatible_protobuf_change_is_refused_to_the_client(live_registry: list[str]
                                                                  ) -> None:
    registry = SchemaRegistryClient({"url": live_registry[0]})
    subject = f"widths-{uuid.uuid4().hex[:8]}"
    registry.register_schema(subject, Schema(
        'syntax = "proto3";\nmessage W { int32 size = 1; }\n', "PROTOBUF"))
    narrower = Schema('syntax = "proto3";\nmessage W { string size = 1; }\n', "PROTOBUF")
    assert registry.test_compatibility(subject, narrower) is False
    with pytest.raises(Exception, match="FIELD_SCALAR_KIND_CHANGED"):
        registry.register_schema(subject, narrower)
