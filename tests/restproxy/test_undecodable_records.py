"""A record the consumer's format cannot present is never skipped (v2 fetch and records/stream).

Confluent's v3 API has no consume path, so v2 `records` and the streaming `records/stream`
are the two ways a REST client reads. Six records, one of them undecodable at the start,
middle or end of what a read takes: the records before it arrive, then 42207 naming topic,
partition and offset, again on every read until the client seeks past it; a plain commit
never covers it.
"""

from __future__ import annotations

import io
import json
import re
import struct
from collections.abc import Callable
from typing import Any

import fastavro
import httpx
import pytest
from confluent_kafka import Producer

from restproxy.instances.instance import IDLE_BUFFER_LIMIT
from restproxy.instances.manager import manager
from tests.restproxy.conftest import AVRO, JSON, Proxy
from tests.restproxy.test_v2_consumers import create, group
from tests.restproxy.test_v2_stream import ndjson, read_stream

COUNT = 6
SCHEMA = {"type": "record", "name": "Reading", "fields": [{"name": "n", "type": "int"}]}


def json_values() -> tuple[Callable[[int], bytes], str]:
    return (lambda n: json.dumps({"n": n}).encode()), JSON


def avro_values(registry_url: str, topic: str) -> tuple[Callable[[int], bytes], str]:
    response = httpx.post(f"{registry_url}/subjects/{topic}-value/versions",
                          json={"schema": json.dumps(SCHEMA)})
    assert response.status_code == 200, response.text
    schema_id = response.json()["id"]
    parsed = fastavro.parse_schema(SCHEMA)

    def encode(n: int) -> bytes:
        out = io.BytesIO(struct.pack(">bI", 0, schema_id))
        out.seek(5)
        fastavro.schemaless_writer(out, parsed, {"n": n})
        return out.getvalue()
    return encode, AVRO


def read_fetch(proxy: Proxy, instance: str, accept: str, want: int
               ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Fetch until `want` records arrived or a read answers an error."""
    records: list[dict[str, Any]] = []
    for _ in range(40):
        response = proxy.get(f"{instance}/records?timeout=500", accept=accept)
        if response.status_code != 200:
            assert response.status_code == 422, response.content
            return records, response.json()
        records += response.json()
        if len(records) >= want:
            break
    return records, None


def read_stream_of(proxy: Proxy, instance: str, accept: str, want: int
                   ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    lines = ndjson(read_stream(proxy.get(
        f"{instance}/records/stream?timeout=5000&max_records={want}", accept=accept)))
    errors = [line for line in lines if "error_code" in line]
    assert errors in ([], lines[-1:])
    return [line for line in lines if "error_code" not in line], errors[0] if errors else None


READERS = {"fetch": read_fetch, "stream": read_stream_of}


def committed(proxy: Proxy, instance: str, topic: str) -> int:
    body = {"partitions": [{"topic": topic, "partition": 0}]}
    return int(proxy.get(f"{instance}/offsets", body=body).json()["offsets"][0]["offset"])


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("bad", [0, 2, COUNT - 1], ids=["start", "middle", "end"])
@pytest.mark.parametrize("fmt", ["json", "avro"])
def test_an_undecodable_record_stops_the_consumer_at_it_until_a_seek(
        proxy: Proxy, proxy_cluster: str, new_topic: Callable[..., str],
        request: pytest.FixtureRequest, fmt: str, bad: int, reader: str) -> None:
    topic = new_topic()
    if fmt == "avro":
        encode, accept = avro_values(request.getfixturevalue("registry_url"), topic)
    else:
        encode, accept = json_values()
    producer = Producer({"bootstrap.servers": proxy_cluster})
    for n in range(COUNT):
        producer.produce(topic, value=b"\xffnot " + fmt.encode() if n == bad else encode(n),
                         partition=0)
    assert producer.flush(10) == 0
    read = READERS[reader]
    instance = create(proxy, group(), format=fmt, **{"auto.commit.enable": "false"})
    assert proxy.post(f"{instance}/subscription", {"topics": [topic]}).status_code == 204

    records, error = read(proxy, instance, accept, COUNT)
    assert [r["value"] for r in records] == [{"n": n} for n in range(bad)]
    assert error is not None and error["error_code"] == 42207
    assert f"topic {topic} partition 0 offset {bad}" in error["message"]
    again, error = read(proxy, instance, accept, COUNT)
    assert again == [] and error is not None and error["error_code"] == 42207

    assert proxy.post(f"{instance}/offsets").status_code == 204
    assert committed(proxy, instance, topic) == (bad if bad else -1001)

    seek = {"offsets": [{"topic": topic, "partition": 0, "offset": bad + 1}]}
    assert proxy.post(f"{instance}/positions", seek).status_code == 204
    rest, error = read(proxy, instance, accept, COUNT - bad - 1)
    assert error is None
    assert [r["offset"] for r in rest] == list(range(bad + 1, COUNT))
    assert proxy.post(f"{instance}/offsets").status_code == 204
    assert committed(proxy, instance, topic) == (COUNT if bad < COUNT - 1 else bad)
    proxy.delete(instance)


def test_a_fresh_json_group_gets_every_valid_record_around_a_bad_one(
        proxy: Proxy, proxy_cluster: str, new_topic: Callable[..., str]) -> None:
    """The issue's case: five JSON records and one that is not JSON, in a fresh group."""
    topic = new_topic()
    producer = Producer({"bootstrap.servers": proxy_cluster})
    for value in [b"1", b"2", b"{oops", b"4", b"5", b"6"]:
        producer.produce(topic, value=value, partition=0)
    producer.flush(10)
    instance = create(proxy, group())
    proxy.post(f"{instance}/subscription", {"topics": [topic]})
    values: list[Any] = []
    for _ in range(40):
        response = proxy.get(f"{instance}/records?timeout=300", accept=JSON)
        if response.status_code == 422:
            found = re.search(r"partition 0 offset (\d+)", response.json()["message"])
            assert found is not None
            offset = int(found.group(1))
            proxy.post(f"{instance}/positions",
                       {"offsets": [{"topic": topic, "partition": 0, "offset": offset + 1}]})
            continue
        values += [r["value"] for r in response.json()]
        if len(values) == 5:
            break
    assert values == [1, 2, 4, 5, 6]
    proxy.delete(instance)




def test_retrying_a_fetch_stuck_at_a_bad_record_buffers_no_more(
        proxy: Proxy, proxy_cluster: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    producer = Producer({"bootstrap.servers": proxy_cluster})
    producer.produce(topic, value=b"{oops", partition=0)
    for n in range(3 * IDLE_BUFFER_LIMIT):
        producer.produce(topic, value=b"%d" % n, partition=0)
        producer.poll(0)
    assert producer.flush(30) == 0
    instance = create(proxy, group())
    proxy.post(f"{instance}/subscription", {"topics": [topic]})
    g, name = instance.split("/")[1], instance.split("/")[3]
    found = manager().locate(g, name, forwarded=False).instance
    assert found is not None
    for _ in range(8):
        response = proxy.get(f"{instance}/records?timeout=500", accept=JSON)
        assert response.status_code == 422, response.content
        assert len(found.pending) <= IDLE_BUFFER_LIMIT
    proxy.delete(instance)
