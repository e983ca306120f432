"""AvroSerializer and AvroDeserializer through our registry and the built-in broker."""

from __future__ import annotations

import json
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from .conftest import field, record

V1 = record("Reading", field("sensor", "string"), field("value", "int"), namespace="mill")
V2 = record(
    "Reading",
    field("sensor", "string"),
    field("value", "long"),
    field("unit", "string", default="C"),
    namespace="mill",
)


def test_records_round_trip_through_the_broker_across_schema_versions(
    live_registry: list[str], kafka_bootstrap: str
) -> None:
    topic = f"readings-{uuid.uuid4().hex[:8]}"
    registry = SchemaRegistryClient({"url": live_registry[0]})
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    context = SerializationContext(topic, MessageField.VALUE)
    for schema, value in (
        (V1, {"sensor": "a", "value": 1}),
        (V2, {"sensor": "b", "value": 2**40, "unit": "K"}),
    ):
        serialize = AvroSerializer(registry, json.dumps(schema))
        producer.produce(topic, value=serialize(value, context))
    producer.flush(30)
    assert registry.get_versions(f"{topic}-value") == [1, 2]

    consumer = Consumer(
        {"bootstrap.servers": kafka_bootstrap, "group.id": topic, "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    # Read with the newest schema: the old record resolves (int -> long, default unit).
    latest = AvroDeserializer(registry, json.dumps(V2))
    by_writer = AvroDeserializer(registry)
    seen: list[tuple[object, object]] = []
    try:
        while len(seen) < 2:
            message = consumer.poll(10)
            assert message is not None, "no record from the broker"
            assert message.error() is None, message.error()
            seen.append((latest(message.value(), context), by_writer(message.value(), context)))
    finally:
        consumer.close()
    assert seen[0] == ({"sensor": "a", "value": 1, "unit": "C"}, {"sensor": "a", "value": 1})
    assert seen[1][0] == {"sensor": "b", "value": 2**40, "unit": "K"}
    assert seen[1][1] == seen[1][0]
