"""JSON Schema and Protobuf in real Chromium against the real ASGI app (Daphne in its own
process) over the test database and the session's broker: a Protobuf message written by
confluent-kafka's ProtobufSerializer through the registry's HTTP API is shown decoded in the
message browser; one produced from the page's form is refused in protobuf's words, then
taken and shown; the schema is on its subject page as highlighted .proto; a JSON Schema
subject's two versions are diffed on its page. Badges checked, nothing clipped.
Screenshots: var/screenshots/<test name>/."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from django.test import override_settings
from google.protobuf import descriptor_pool, message_factory
from playwright.sync_api import expect

from controlcenter.access import Capability
from registry.protobuf import compiler
from tests.controlcenter.browser import Browser, LiveServer, serve
from tests.controlcenter.conftest import PASSWORD, make_user
from tests.controlcenter.test_messagebrowser import create

ORDER_PROTO = """syntax = "proto3";
package shop.v1;

message Order {
  int64 order_id = 1;
  string item = 2;
  repeated Line lines = 3;
  message Line {
    string sku = 1;
    int32 quantity = 2;
  }
}
"""


@pytest.fixture(scope="module")
def app_server(django_db_setup: None, kafka_bootstrap: str) -> Iterator[LiveServer]:
    with override_settings(KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap), \
            serve("millrace.asgi:application") as server:
        yield server


@pytest.fixture
def tab(chromium: Any, app_server: LiveServer, request: pytest.FixtureRequest,
        transactional_db: None) -> Iterator[Browser]:
    browser = Browser(chromium, app_server, request.node.name)
    yield browser
    browser.close()
    assert not browser.errors, f"JavaScript errors on the page: {browser.errors}"


def order_class() -> Any:
    """A message class for ORDER_PROTO, as protoc-generated code would give one."""
    descriptor, _ = compiler.compile_text(ORDER_PROTO, {})
    descriptor.name = "shop/v1/order.proto"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.v1.Order"))


def inside(tab: Browser, selector: str) -> None:
    """Nothing in `selector` runs past its own box or the window (no clipped text)."""
    overflow = tab.page.locator(selector).evaluate(
        "el => [el.scrollWidth - el.clientWidth, el.getBoundingClientRect().right"
        " - document.documentElement.clientWidth]")
    assert overflow[0] <= 1 and overflow[1] <= 1, (selector, overflow)


def test_a_protobuf_message_from_confluents_serializer_is_shown_decoded(
        tab: Browser, app_server: LiveServer, kafka_bootstrap: str) -> None:
    topic = create(kafka_bootstrap)
    registry = SchemaRegistryClient({"url": f"{app_server.url}/schema-registry"})
    order = order_class()
    serializer = ProtobufSerializer(order, registry, {"use.deprecated.format": False})
    value = serializer(order(order_id=9007199254740993, item="genmaicha",
                             lines=[order.Line(sku="gm-250", quantity=2)]),
                       SerializationContext(topic, MessageField.VALUE))
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(topic, value, key=b"order-9")
    assert producer.flush(30) == 0
    schema_id = registry.get_latest_version(f"{topic}-value").schema_id

    make_user("producer", Capability.PRODUCE_MESSAGES)
    tab.login("producer", PASSWORD, then=f"/topics/{topic}/messages/")
    row = tab.page.locator("#message-rows tr.message-row")
    expect(row).to_have_count(1)
    value_cell = row.locator("td").nth(4)
    badge = value_cell.locator(".format")
    assert badge.text_content() == f"protobuf · schema {schema_id}"
    assert badge.evaluate("el => getComputedStyle(el).textTransform") == "uppercase"
    assert value_cell.locator(".format-message").text_content() == "shop.v1.Order"
    # canonical proto3 JSON: lowerCamelCase names, int64 as a string
    assert json.loads(value_cell.locator("pre").text_content() or "") == {
        "orderId": "9007199254740993", "item": "genmaicha",
        "lines": [{"sku": "gm-250", "quantity": 2}]}
    assert row.locator("td").nth(3).locator(".format").text_content() == "text"
    for selector in ("#messages-table", "#message-rows tr.message-row td:nth-child(5) pre"):
        inside(tab, selector)
    tab.page.locator("#messages-table").screenshot(
        path=str(tab.shots / "protobuf-row.png"))

    # Produce from the page with the same subject: refused in protobuf's words, then taken.
    tab.page.click("#produce summary")
    tab.page.fill("#id_produce-subject", f"{topic}-value")
    tab.page.fill("#id_produce-value", '{"orderId": "ten"}')
    with tab.page.expect_navigation():
        tab.page.click("#produce-form button[type=submit]")
    error = tab.page.locator("#produce-form .errorlist").first
    assert "Failed to parse orderId field" in (error.text_content() or "")
    inside(tab, "#produce")
    tab.snap("refused")
    tab.page.fill("#id_produce-value", '{"sku": "gm-1", "quantity": 1}')
    tab.page.fill("#id_produce-message_type", "shop.v1.Order.Line")
    with tab.page.expect_navigation():
        tab.page.click("#produce-form button[type=submit]")
    assert f"Produced protobuf (schema id {schema_id}, shop.v1.Order.Line)" in (
        tab.page.locator(".messages").text_content() or "")
    expect(row).to_have_count(2)
    assert row.first.locator(".format-message").text_content() == "shop.v1.Order.Line"
    tab.snap("produced")

    # The schema the serializer registered, on its page as highlighted .proto text.
    tab.visit(f"/schemas/{topic}-value/")
    assert tab.page.locator("#subject-format").text_content() == "Protobuf"
    shown = tab.page.locator("#schema-shown pre")
    assert "message Order" in (shown.text_content() or "")
    assert "message" in shown.locator(".hl-keyword").all_text_contents()
    inside(tab, "#schema-shown pre")


def test_a_json_schema_diff_is_shown_highlighted_on_the_schema_page(
        tab: Browser, app_server: LiveServer) -> None:
    subject = "payments-value"
    v1 = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Payment",
          "type": "object", "additionalProperties": False, "required": ["id"],
          "properties": {"id": {"type": "integer"}, "amount": {"type": "number"}}}
    v2 = {**v1, "properties": {**v1["properties"],  # type: ignore[dict-item]
                               "note": {"type": "string", "maxLength": 200}}}
    url = f"{app_server.url}/schema-registry/subjects/{subject}/versions"
    for schema in (v1, v2):
        answer = httpx.post(url, json={"schema": json.dumps(schema), "schemaType": "JSON"},
                            headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
        assert answer.status_code == 200, answer.text

    tab.visit(f"/schemas/{subject}/")
    assert tab.page.locator("#subject-format").text_content() == "JSON Schema"
    diff = tab.page.locator("#schema-diff table.diff")
    added = [re.sub(r"\s+", " ", t).strip() for t in diff.locator("td.add").all_text_contents()]
    assert '"note": {' in added and '"maxLength": 200' in added
    key = diff.locator("td.add .hl-key").first
    assert key.text_content() == '"note"'
    assert key.evaluate("el => getComputedStyle(el).color") != diff.locator(
        "td.add").first.evaluate("el => getComputedStyle(el).color")  # coloured
    for selector in ("#schema-diff", "#schema-shown pre", "#schema-register"):
        inside(tab, selector)
    assert tab.page.locator("#id_schema_type").input_value() == "JSON"
    tab.page.select_option("#id_schema_type", "PROTOBUF")
    assert tab.page.locator("#id_schema").get_attribute("placeholder", timeout=5000
                                                        ).startswith('syntax = "proto3";')
    tab.page.locator("#schema-diff").screenshot(path=str(tab.shots / "json-schema-diff.png"))
