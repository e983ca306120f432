"""Decoding, filtering and downloading messages read from a real broker."""

from __future__ import annotations

import csv
import io
import json
import struct

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from clusterclient.records import RecordReader, produce
from controlcenter import messagebrowser
from controlcenter.messagebrowser import MessageQuery
from controlcenter.messagecodec import Decoder, EncodeError, encode_avro
from registry.actions import SchemaRequest, register_schema
from tests.compat.clients import new_topic

ORDER = json.dumps({"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "int"}, {"name": "item", "type": "string"}]})


def create(bootstrap: str, partitions: int = 1) -> str:
    topic = new_topic("browse")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)
    return topic


@pytest.mark.django_db
def test_it_decodes_avro_json_text_and_binary() -> None:
    schema_id = register_schema("orders-value", SchemaRequest(ORDER), normalize=False)
    avro, used = encode_avro("orders-value", '{"id": 7, "item": "tea"}')
    assert used == schema_id and avro[:5] == struct.pack(">bI", 0, schema_id)
    decoder = Decoder()
    decoded = decoder.render(avro)
    assert (decoded.kind, decoded.schema_id) == ("avro", schema_id)
    assert json.loads(decoded.text) == {"id": 7, "item": "tea"}
    assert decoder.render(b'{"a":1}').text == '{\n  "a": 1\n}'
    assert decoder.render("héllo".encode()).kind == "text"
    binary = decoder.render(b"\xff\x00\x01")
    assert (binary.kind, binary.hex, binary.base64) == ("binary", "ff 00 01", "/wAB")
    assert decoder.render(None).kind == "null"
    unknown = decoder.render(struct.pack(">bI", 0, 999999) + b"\x02")
    assert unknown.kind == "binary"


@pytest.mark.django_db
def test_encoding_refuses_what_does_not_fit_the_subject() -> None:
    register_schema("fit-value", SchemaRequest(ORDER), normalize=False)
    with pytest.raises(EncodeError, match="not found"):
        encode_avro("missing-value", "{}")
    with pytest.raises(EncodeError, match="not valid JSON"):
        encode_avro("fit-value", "{id: 1")
    with pytest.raises(EncodeError, match="does not match"):
        encode_avro("fit-value", '{"id": "seven"}')


@pytest.mark.django_db
def test_it_browses_newest_first_and_from_the_beginning(kafka_bootstrap: str) -> None:
    topic = create(kafka_bootstrap, partitions=2)
    for i in range(6):
        produce(kafka_bootstrap, topic, f"value-{i}".encode(), key=f"k{i}".encode(),
                partition=i % 2)
    with RecordReader(kafka_bootstrap) as reader:
        newest = messagebrowser.browse(reader, MessageQuery(topic, limit=3))
        oldest = messagebrowser.browse(reader, MessageQuery(topic, start="oldest", limit=3))
        at = messagebrowser.browse(reader, MessageQuery(topic, partition=1, start="offset",
                                                        offset=1, limit=10))
    assert [m.value.text for m in newest.messages] == ["value-5", "value-4", "value-3"]
    assert [m.value.text for m in oldest.messages] == ["value-0", "value-1", "value-2"]
    assert [(m.partition, m.offset) for m in at.messages] == [(1, 1), (1, 2)]
    assert newest.positions == "0:3,1:3"


@pytest.mark.django_db
def test_filters_match_keys_headers_and_decoded_values(kafka_bootstrap: str) -> None:
    register_schema("filter-value", SchemaRequest(ORDER), normalize=False)
    topic = create(kafka_bootstrap)
    for i, item in enumerate(["tea", "coffee", "Teapot"]):
        value, _ = encode_avro("filter-value", json.dumps({"id": i, "item": item}))
        produce(kafka_bootstrap, topic, value, key=f"user-{i}".encode(),
                headers=[("source", b"web" if i else b"app")], partition=0)
    with RecordReader(kafka_bootstrap) as reader:
        def found(key: str = "", value: str = "", header: str = "") -> list[int]:
            query = MessageQuery(topic, start="oldest", key=key, value=value, header=header)
            page = messagebrowser.browse(reader, query)
            return [m.offset for m in page.messages]

        assert found(value="tea") == [0, 2]
        assert found(key="user-1") == [1]
        assert found(header="source=web") == [1, 2]
        assert found(header="source") == [0, 1, 2]
        assert found(value="tea", header="source=app") == [0]
        assert found(value="milk") == []


@pytest.mark.django_db
def test_downloads_hold_the_shown_messages(kafka_bootstrap: str) -> None:
    topic = create(kafka_bootstrap)
    produce(kafka_bootstrap, topic, b"\x00\xff", key=b"k", headers=[("h", b"v")], partition=0)
    with RecordReader(kafka_bootstrap) as reader:
        page = messagebrowser.browse(reader, MessageQuery(topic))
    as_json = json.loads(messagebrowser.as_json(page.messages))
    assert as_json[0]["value"] == {"format": "binary", "text": "00 ff", "base64": "AP8="}
    rows = list(csv.DictReader(io.StringIO(messagebrowser.as_csv(page.messages))))
    assert rows[0]["value"] == "AP8=" and rows[0]["key"] == "k"
    assert json.loads(rows[0]["headers"]) == {"h": "v"}
