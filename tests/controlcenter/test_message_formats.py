"""JSON Schema and Protobuf in the message browser and in produce-a-message, beside Avro:
values produced from the page and the API are checked against their schema, written in
Confluent's wire format to a real broker, and read back decoded with their format badge and
schema id. (A value written by confluent-kafka's ProtobufSerializer through the registry's
HTTP API is decoded in test_schema_formats_browser.py.)"""

from __future__ import annotations

import json
import struct

import pytest
from django.contrib.auth.models import User
from django.test import Client
from pytest_django.fixtures import Settings

from controlcenter import wireformats
from controlcenter.messagecodec import Decoder, EncodeError, encode
from controlcenter.models import AuditEntry
from registry.actions import SchemaRequest, register_schema
from registry.lookups import parsed_schema
from registry.models import Schema
from tests.compat.clients import new_topic

pytestmark = pytest.mark.django_db

ORDER_PROTO = """syntax = "proto3";
package shop.v1;

message Order {
  int64 order_id = 1;
  string item = 2;
  repeated Line lines = 3;
  Status status = 4;
  message Line {
    string sku = 1;
    int32 quantity = 2;
  }
}

message Refund {
  int64 order_id = 1;
}

enum Status {
  STATUS_UNSPECIFIED = 0;
  PAID = 1;
}
"""
PAYMENT_SCHEMA = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "Payment", "type": "object",
    "properties": {"id": {"type": "integer"}, "amount": {"type": "number", "minimum": 0}},
    "required": ["id", "amount"], "additionalProperties": False})


@pytest.fixture(autouse=True)
def _cluster(settings: Settings, kafka_bootstrap: str) -> None:
    settings.KAFKA_BOOTSTRAP_SERVERS = kafka_bootstrap


@pytest.fixture
def admin(client: Client) -> Client:
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    return client


@pytest.fixture
def schemas() -> dict[str, int]:
    return {
        "protobuf": register_schema("orders-value", SchemaRequest(
            ORDER_PROTO, schema_type="PROTOBUF"), normalize=False),
        "json": register_schema("payments-value", SchemaRequest(
            PAYMENT_SCHEMA, schema_type="JSON"), normalize=False),
    }


def topic_with_partition(admin: Client) -> str:
    name = new_topic("formats")
    admin.post("/topics/+create/", {"name": name, "partitions": "1"})
    return name


def test_message_indexes_are_written_as_the_wire_format_counts_them(
        schemas: dict[str, int]) -> None:
    file = parsed_schema(Schema.objects.get(id=schemas["protobuf"])).parsed
    assert wireformats.message_types(file) == ["shop.v1.Order", "shop.v1.Order.Line",
                                               "shop.v1.Refund"]
    assert wireformats.message_indexes(file, "") == [0]
    assert wireformats.message_indexes(file, ".shop.v1.Order.Line") == [0, 0]
    assert wireformats.message_indexes(file, "shop.v1.Refund") == [1]
    assert wireformats.encode_message_indexes([0]) == b"\x00"
    assert wireformats.encode_message_indexes([0, 0]) == b"\x04\x00\x00"  # zig-zag 2, 0, 0
    assert wireformats.encode_message_indexes([1]) == b"\x02\x02"
    with pytest.raises(wireformats.WireError, match=r"no message shop\.v1\.Nope; it has"):
        wireformats.message_indexes(file, "shop.v1.Nope")


def test_protobuf_and_json_schema_values_round_trip_through_the_codec(
        schemas: dict[str, int]) -> None:
    order = encode('{"orderId": "12", "item": "tea", "lines": [{"sku": "t1", "quantity": 2}],'
                   ' "status": "PAID"}', subject="orders-value")
    assert (order.kind, order.schema_id, order.message_type) == (
        "protobuf", schemas["protobuf"], "shop.v1.Order")
    assert order.value[:6] == struct.pack(">bI", 0, schemas["protobuf"]) + b"\x00"
    decoded = Decoder().render(order.value)
    assert (decoded.kind, decoded.label, decoded.schema_id, decoded.message_type) == (
        "protobuf", "protobuf", schemas["protobuf"], "shop.v1.Order")
    # canonical proto3 JSON: lowerCamelCase, int64 as a string, enums by name
    assert json.loads(decoded.text) == {"orderId": "12", "item": "tea", "status": "PAID",
                                        "lines": [{"sku": "t1", "quantity": 2}]}
    line = encode('{"sku": "x", "quantity": 3}', schema_id=schemas["protobuf"],
                  message_type="shop.v1.Order.Line")
    assert line.value[5:8] == b"\x04\x00\x00"
    assert Decoder().render(line.value).message_type == "shop.v1.Order.Line"

    payment = encode('{"id": 1, "amount": 2.5}', subject="payments-value")
    assert payment.value == struct.pack(">bI", 0, schemas["json"]) + b'{"id":1,"amount":2.5}'
    shown = Decoder().render(payment.value)
    assert (shown.kind, shown.label, shown.schema_id, shown.note) == (
        "jsonschema", "JSON Schema", schemas["json"], "")
    outside = Decoder().render(struct.pack(">bI", 0, schemas["json"]) + b'{"id": "x"}')
    assert outside.kind == "jsonschema" and "does not match its schema" in outside.note
    garbage = Decoder().render(struct.pack(">bI", 0, schemas["protobuf"]) + b"\x00\xff\xff")
    assert garbage.kind == "binary" and f"schema {schemas['protobuf']}" in garbage.note


def test_values_that_do_not_fit_are_refused_in_the_schemas_own_words(
        schemas: dict[str, int]) -> None:
    with pytest.raises(EncodeError, match=r"at /amount: -1 is less than the minimum of 0"):
        encode('{"id": 1, "amount": -1}', subject="payments-value")
    with pytest.raises(EncodeError, match="Additional properties are not allowed"):
        encode('{"id": 1, "amount": 1, "tip": 2}', schema_id=schemas["json"])
    with pytest.raises(EncodeError, match='no field named "colour"'):
        encode('{"colour": "red"}', subject="orders-value")
    with pytest.raises(EncodeError, match="message is a JSON object, not an array"):
        encode("[1]", subject="orders-value")
    with pytest.raises(EncodeError, match="JSON has no infinity"):
        encode('{"id": 1, "amount": 1e999}', subject="payments-value")
    with pytest.raises(EncodeError, match="not valid JSON: maximum recursion"):
        encode("[" * 100_000, subject="payments-value")
    with pytest.raises(EncodeError, match="Invalid enum value WRAPPED"):
        encode('{"status": "WRAPPED"}', subject="orders-value")
    with pytest.raises(EncodeError, match=r"no message shop\.v1\.Gift"):
        encode("{}", subject="orders-value", message_type="shop.v1.Gift")
    with pytest.raises(EncodeError, match="a message type is for Protobuf"):
        encode("{}", subject="payments-value", message_type="shop.v1.Order")
    with pytest.raises(EncodeError, match="Schema 999999 not found"):
        encode("{}", schema_id=999999)
    with pytest.raises(EncodeError, match="either a subject or a schema id"):
        encode("{}", subject="orders-value", schema_id=schemas["protobuf"])


def test_the_page_produces_all_three_formats_and_shows_them_decoded(
        admin: Client, schemas: dict[str, int]) -> None:
    avro_id = register_schema("teas-value", SchemaRequest(json.dumps({
        "type": "record", "name": "Tea", "fields": [{"name": "kind", "type": "string"}]})),
        normalize=False)
    name = topic_with_partition(admin)
    form = admin.get(f"/topics/{name}/messages/").content.decode()
    assert '<option value="orders-value">protobuf</option>' in form
    assert '<option value="payments-value">JSON Schema</option>' in form
    for fields in ({"produce-subject": "teas-value", "produce-value": '{"kind": "oolong"}'},
                   {"produce-subject": "orders-value",
                    "produce-value": '{"orderId": "7", "item": "sencha"}'},
                   {"produce-schema_id": str(schemas["protobuf"]),
                    "produce-message_type": "shop.v1.Refund",
                    "produce-value": '{"orderId": "8"}'},
                   {"produce-subject": "payments-value",
                    "produce-value": '{"id": 3, "amount": 9.5}'}):
        done = admin.post(f"/topics/{name}/produce/", fields, follow=True)
        assert "Produced " in done.content.decode(), done.content.decode()[-3000:]
    html = admin.get(f"/topics/{name}/messages/", {"start": "oldest"}).content.decode()
    assert f"avro · schema {avro_id}</span>" in html
    assert f"protobuf · schema {schemas['protobuf']}</span>" in html
    assert '<code class="format-message">shop.v1.Order</code>' in html
    assert '<code class="format-message">shop.v1.Refund</code>' in html
    assert "&quot;orderId&quot;: &quot;7&quot;" in html and "sencha" in html
    assert f"JSON Schema · schema {schemas['json']}</span>" in html
    downloaded = admin.get(f"/topics/{name}/messages/", {"start": "oldest",
                                                         "download": "json"}).json()
    assert [m["value"]["format"] for m in downloaded] == ["avro", "protobuf", "protobuf",
                                                          "jsonschema"]
    assert downloaded[2]["value"]["message_type"] == "shop.v1.Refund"
    audited = AuditEntry.objects.filter(action="topic.produce", result="ok")
    assert sorted(e.parameters["schema_id"] for e in audited) == sorted(
        [avro_id, schemas["protobuf"], schemas["protobuf"], schemas["json"]])


def test_the_page_refuses_a_value_outside_its_schema_and_produces_nothing(
        admin: Client, schemas: dict[str, int]) -> None:
    name = topic_with_partition(admin)
    refused = admin.post(f"/topics/{name}/produce/", {
        "produce-subject": "payments-value", "produce-value": '{"id": 1}'})
    body = refused.content.decode()
    assert refused.status_code == 400 and "&#x27;amount&#x27; is a required property" in body
    both = admin.post(f"/topics/{name}/produce/", {
        "produce-subject": "payments-value", "produce-schema_id": str(schemas["json"]),
        "produce-value": "{}"})
    assert both.status_code == 400 and "Give either a subject or a schema id" in \
        both.content.decode()
    page = admin.get(f"/topics/{name}/messages/").content.decode()
    assert 'class="message-row' not in page
    assert not AuditEntry.objects.filter(action="topic.produce").exists()


def test_the_api_produces_json_schema_and_protobuf(admin: Client,
                                                   schemas: dict[str, int]) -> None:
    name = topic_with_partition(admin)
    url = f"/api/v1/topics/{name}/messages"
    made = admin.post(url, {"schema_id": schemas["protobuf"], "message_type": "shop.v1.Refund",
                            "value": '{"orderId": "5"}'}, content_type="application/json")
    assert made.status_code == 201, made.content
    bad = admin.post(url, {"subject": "payments-value", "value": '{"id": 1, "amount": "x"}'},
                     content_type="application/json")
    assert bad.status_code == 400 and bad.json()["error_code"] == "INVALID_VALUE"
    assert "'x' is not of type 'number'" in bad.json()["message"]
    shown = admin.get(url, {"start": "oldest"}).json()["messages"]
    assert len(shown) == 1 and shown[0]["value"]["format"] == "protobuf"
    assert shown[0]["value"]["schema_id"] == schemas["protobuf"]
    assert json.loads(shown[0]["value"]["text"]) == {"orderId": "5"}
