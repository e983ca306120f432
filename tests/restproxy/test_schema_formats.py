"""JSON Schema and Protobuf through the REST proxy: v2 embedded formats, v3 data types.

The proxy runs in-process (Django test client) against a real registry process and the
session broker. What the proxy writes is read by confluent-kafka's own JSONDeserializer and
ProtobufDeserializer (Confluent's wire format, message indexes included), and by consumer
instances of format `jsonschema`/`protobuf` (Protobuf as canonical proto3 JSON). A value
that does not match its schema is 42203 and nothing reaches the topic.
"""

from __future__ import annotations

import base64
import functools
import json
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from restproxy import openapi_spec
from tests.restproxy.conftest import JSONSCHEMA, PROTOBUF, Proxy
from tests.restproxy.test_v2_consumers import create, fetch_until, group
from tests.restproxy.test_v3 import APP, cluster_path

ORDER = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {"item": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}},
    "required": ["item", "qty"],
    "additionalProperties": False,
}
ORDERS = [{"item": "flour", "qty": 3}, {"item": "grain", "qty": 40}]
BAD_ORDER = {"item": "flour", "qty": 0}

READING = """
syntax = "proto3";
package mill.rest;

message Reading {
  string sensor_name = 1;
  int64 count = 2;
  Kind kind = 3;
  repeated double samples = 4;
  Place place = 5;
  enum Kind {
    KIND_UNSPECIFIED = 0;
    TEMPERATURE = 1;
  }
  message Place {
    string site = 1;
  }
}
"""
# Sent with .proto names and JSON names both, as the proto3 JSON mapping reads either.
READINGS = [{"sensor_name": "wheel", "count": "12", "kind": "TEMPERATURE",
             "samples": [1.5, 2.0], "place": {"site": "weir"}},
            {"sensorName": "race"}]
# Read back in the canonical mapping: JSON names, int64 as strings, enums by name, fields
# without presence at their defaults.
READINGS_JSON = [{"sensorName": "wheel", "count": "12", "kind": "TEMPERATURE",
                  "samples": [1.5, 2.0], "place": {"site": "weir"}},
                 {"sensorName": "race", "count": "0", "kind": "KIND_UNSPECIFIED",
                  "samples": []}]
BAD_READING = {"sensor_name": "wheel", "count": "many"}

# format: (v2 media type, v3 type, schema, values sent, values read back, an invalid value)
FORMATS: dict[str, tuple[str, str, str, list[Any], list[Any], dict[str, Any]]] = {
    "jsonschema": (JSONSCHEMA, "JSONSCHEMA", json.dumps(ORDER), ORDERS, ORDERS, BAD_ORDER),
    "protobuf": (PROTOBUF, "PROTOBUF", READING, READINGS, READINGS_JSON, BAD_READING),
}


def read_topic(bootstrap: str, topic: str, wanted: int) -> list[tuple[bytes | None, bytes]]:
    """Every record of the topic (at most `wanted`), read by a plain Kafka consumer."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    found: list[tuple[bytes | None, bytes]] = []
    try:
        for _ in range(20 if wanted else 6):
            for message in consumer.consume(max(wanted - len(found), 1), 0.5):
                assert message.error() is None, message.error()
                found.append((message.key(), message.value()))
            if wanted and len(found) >= wanted:
                break
    finally:
        consumer.close()
    return found


@functools.cache
def reading_class(registry_url: str, schema_id: int) -> Any:
    """The message class for the registered schema, from its serialized descriptor (one
    class per schema: messages of two classes never compare equal)."""
    served = httpx.get(f"{registry_url}/schemas/ids/{schema_id}",
                       params={"format": "serialized"}).json()
    file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(served["schema"]))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("mill.rest.Reading"))


def deserialized(registry_url: str, fmt: str, topic: str, schema_id: int,
                 values: list[bytes]) -> list[Any]:
    """What confluent-kafka's deserializer makes of the values (Protobuf as messages)."""
    context = SerializationContext(topic, MessageField.VALUE)
    if fmt == "jsonschema":
        client = SchemaRegistryClient({"url": registry_url})
        read_json = JSONDeserializer(None, schema_registry_client=client)
        return [read_json(value, context) for value in values]
    read_proto = ProtobufDeserializer(reading_class(registry_url, schema_id),
                                      {"use.deprecated.format": False})
    return [read_proto(value, context) for value in values]


def expected_messages(registry_url: str, fmt: str, schema_id: int, sent: list[Any]) -> list[Any]:
    if fmt == "jsonschema":
        return sent
    from google.protobuf import json_format

    cls = reading_class(registry_url, schema_id)
    return [json_format.ParseDict(value, cls()) for value in sent]


def consumed(proxy: Proxy, fmt: str, accept: str, topic: str, count: int) -> list[Any]:
    instance = create(proxy, group(), format=fmt)
    assert proxy.post(f"{instance}/subscription", {"topics": [topic]}).status_code == 204
    records = fetch_until(proxy, instance, count, accept=accept)
    proxy.delete(instance)
    return records


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_v2_produce_round_trips_through_deserializers_and_consumer_instances(
        proxy: Proxy, registry_url: str, proxy_cluster: str,
        new_topic: Callable[..., str], fmt: str) -> None:
    media_type, _, schema, sent, as_json, _ = FORMATS[fmt]
    topic = new_topic()
    body: dict[str, Any] = {"value_schema": schema, "records": [{"value": value} for value in sent]}
    if fmt == "jsonschema":
        body["key_schema"] = json.dumps({"type": "string"})
        body["records"] = [{"key": f"k{n}", "value": v} for n, v in enumerate(sent)]
    response = proxy.post(f"topics/{topic}", body, content_type=media_type)
    assert response.status_code == 200, response.content
    answer = response.json()
    schema_id = answer["value_schema_id"]
    assert isinstance(schema_id, int)
    assert [o["offset"] for o in answer["offsets"]] == list(range(len(sent)))
    subject = httpx.get(f"{registry_url}/subjects/{topic}-value/versions/latest").json()
    assert subject["id"] == schema_id
    assert subject["schemaType"] == {"jsonschema": "JSON", "protobuf": "PROTOBUF"}[fmt]

    written = read_topic(proxy_cluster, topic, len(sent))
    assert deserialized(registry_url, fmt, topic, schema_id, [v for _, v in written]) == \
        expected_messages(registry_url, fmt, schema_id, sent)
    records = consumed(proxy, fmt, media_type, topic, len(sent))
    assert [r["value"] for r in records] == as_json
    if fmt == "jsonschema":
        assert isinstance(answer["key_schema_id"], int)
        assert [r["key"] for r in records] == [f"k{n}" for n in range(len(sent))]

    # By id, the schema is not registered again.
    again = proxy.post(f"topics/{topic}", {"value_schema_id": schema_id,
                                           "records": [{"value": sent[0]}]},
                       content_type=media_type)
    assert again.status_code == 200, again.content
    assert again.json()["offsets"][0]["offset"] == len(sent)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_v3_produce_by_schema_by_id_and_by_subject_version(
        proxy: Proxy, registry_url: str, proxy_cluster: str,
        new_topic: Callable[..., str], fmt: str) -> None:
    media_type, kind, schema, sent, as_json, _ = FORMATS[fmt]
    topic = new_topic()
    path = f"{cluster_path(proxy)}/topics/{topic}/records"

    def produce(value: dict[str, Any]) -> dict[str, Any]:
        response = proxy.post(path, {"value": value}, content_type=APP)
        assert response.status_code == 200, response.content
        body: dict[str, Any] = response.json()
        assert body["error_code"] == 200 and body["value"]["type"] == kind
        return body

    produce({"type": kind, "schema": schema, "data": sent[0]})
    subject = httpx.get(f"{registry_url}/subjects/{topic}-value/versions/latest").json()
    schema_id = subject["id"]
    produce({"type": kind, "schema_id": schema_id, "data": sent[1]})
    produce({"schema_id": schema_id, "data": sent[0]})  # the type is the schema's own
    produce({"type": kind, "subject": f"{topic}-value", "schema_version": 1, "data": sent[1]})
    produce({"type": kind, "data": sent[0]})  # the subject's latest version

    written = read_topic(proxy_cluster, topic, 5)
    values = [sent[0], sent[1], sent[0], sent[1], sent[0]]
    assert deserialized(registry_url, fmt, topic, schema_id, [v for _, v in written]) == \
        expected_messages(registry_url, fmt, schema_id, values)
    records = consumed(proxy, fmt, media_type, topic, 5)
    assert [r["value"] for r in records] == [as_json[0], as_json[1]] * 2 + [as_json[0]]

    # A schema of another type is refused, not misread.
    other = proxy.post(path, {"value": {"type": "AVRO", "schema_id": schema_id,
                                        "data": sent[0]}}, content_type=APP)
    assert other.status_code == 422 and other.json()["error_code"] == 42205


@pytest.mark.parametrize("api", ["v2", "v3"])
@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_a_value_that_does_not_match_its_schema_is_42203_and_nothing_is_written(
        proxy: Proxy, registry_url: str, proxy_cluster: str,
        new_topic: Callable[..., str], fmt: str, api: str) -> None:
    media_type, kind, schema, sent, _, bad = FORMATS[fmt]
    topic = new_topic()
    if api == "v2":  # a good record first: the request is all or nothing
        response = proxy.post(f"topics/{topic}", {
            "value_schema": schema, "records": [{"value": sent[0]}, {"value": bad}]},
            content_type=media_type)
    else:
        response = proxy.post(f"{cluster_path(proxy)}/topics/{topic}/records", {
            "value": {"type": kind, "schema": schema, "data": bad}}, content_type=APP)
    assert response.status_code == 422, response.content
    body = response.json()
    assert body["error_code"] == 42203 and set(body) == {"error_code", "message"}
    assert read_topic(proxy_cluster, topic, 0) == []
    offsets = proxy.get(f"topics/{topic}/partitions/0/offsets").json()
    assert offsets == {"beginning_offset": 0, "end_offset": 0}


def test_a_json_schema_with_references_validates_through_them(
        proxy: Proxy, registry_url: str, proxy_cluster: str,
        new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    place = {"type": "object", "properties": {"site": {"type": "string"}},
             "required": ["site"]}
    mill = {"type": "object", "properties": {"place": {"$ref": "place.json"}}}
    registered = httpx.post(f"{registry_url}/subjects/{topic}-place/versions",
                            json={"schema": json.dumps(place), "schemaType": "JSON"})
    assert registered.status_code == 200, registered.text
    registered = httpx.post(f"{registry_url}/subjects/{topic}-value/versions", json={
        "schema": json.dumps(mill), "schemaType": "JSON",
        "references": [{"name": "place.json", "subject": f"{topic}-place", "version": 1}]})
    assert registered.status_code == 200, registered.text
    schema_id = registered.json()["id"]

    def produce(value: Any) -> Any:
        return proxy.post(f"topics/{topic}", {"value_schema_id": schema_id,
                                              "records": [{"value": value}]},
                          content_type=JSONSCHEMA)

    refused = produce({"place": {"name": "weir"}})
    assert refused.status_code == 422 and refused.json()["error_code"] == 42203
    assert "site" in refused.json()["message"]
    assert produce({"place": {"site": "weir"}}).status_code == 200
    records = consumed(proxy, "jsonschema", JSONSCHEMA, topic, 1)
    assert [r["value"] for r in records] == [{"place": {"site": "weir"}}]


def test_a_consumer_of_one_schema_format_refuses_another_s_records(
        proxy: Proxy, registry_url: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    produced = proxy.post(f"topics/{topic}", {"value_schema": json.dumps(ORDER),
                                              "records": [{"value": ORDERS[0]}]},
                          content_type=JSONSCHEMA)
    assert produced.status_code == 200, produced.content
    instance = create(proxy, group(), format="protobuf")
    assert proxy.post(f"{instance}/subscription", {"topics": [topic]}).status_code == 204
    for _ in range(20):
        response = proxy.get(f"{instance}/records?timeout=500", accept=PROTOBUF)
        if response.status_code != 200 or response.json():
            break
    assert response.status_code == 422 and response.json()["error_code"] == 42207
    assert "is JSON, not PROTOBUF" in response.json()["message"]
    proxy.delete(instance)


@pytest.mark.parametrize("media_type", [JSONSCHEMA, PROTOBUF])
def test_the_documented_produce_examples_answer(
        proxy: Proxy, registry_url: str, new_topic: Callable[..., str], media_type: str) -> None:
    """test_openapi.py runs each operation's first example; these are the others'."""
    content = openapi_spec.PATHS["/topics/{topic}"]["post"]["requestBody"]["content"]
    response = proxy.post(f"topics/{new_topic()}", content[media_type]["example"],
                          content_type=media_type)
    assert response.status_code == 200, response.content
    assert response.json()["offsets"][0]["error_code"] is None


def test_a_protobuf_schema_with_an_import_registered_as_its_path(
        proxy: Proxy, registry_url: str, new_topic: Callable[..., str]) -> None:
    """confluent-kafka's serializer registers each imported file under its path as subject
    (`mill/place.proto`, a slash inside the subject); the proxy fetches it by that name."""
    topic = new_topic()
    place_subject = f"{topic}/mill/place.proto"
    place = 'syntax = "proto3"; package mill; message Place { string site = 1; }'
    gate = ('syntax = "proto3"; package mill; import "mill/place.proto"; '
            'message Gate { Place place = 1; uint32 width = 2; }')
    headers = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
    quoted = place_subject.replace("/", "%2F")
    registered = httpx.post(f"{registry_url}/subjects/{quoted}/versions", headers=headers,
                            json={"schema": place, "schemaType": "PROTOBUF"})
    assert registered.status_code == 200, registered.text
    registered = httpx.post(f"{registry_url}/subjects/{topic}-value/versions", headers=headers,
                            json={"schema": gate, "schemaType": "PROTOBUF", "references": [
                                {"name": "mill/place.proto", "subject": place_subject,
                                 "version": 1}]})
    assert registered.status_code == 200, registered.text
    schema_id = registered.json()["id"]

    def produce(value: Any) -> Any:
        return proxy.post(f"topics/{topic}", {"value_schema_id": schema_id,
                                              "records": [{"value": value}]},
                          content_type=PROTOBUF)

    refused = produce({"place": {"site": 7}, "width": 2})
    assert refused.status_code == 422 and refused.json()["error_code"] == 42203
    assert produce({"place": {"site": "weir"}, "width": 2}).status_code == 200
    records = consumed(proxy, "protobuf", PROTOBUF, topic, 1)
    assert [r["value"] for r in records] == [{"place": {"site": "weir"}, "width": 2}]
