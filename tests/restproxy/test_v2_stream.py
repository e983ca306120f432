"""Streaming consume (records/stream) in-process over the built-in broker."""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync
from confluent_kafka import Producer

from restproxy.instances.manager import manager
from tests.restproxy.conftest import AVRO, BINARY, JSON, Proxy
from tests.restproxy.test_v2_consumers import create, fetch_until, group, produce_json


def read_stream(response: Any) -> bytes:
    assert response.status_code == 200, response.content

    async def collect() -> list[bytes]:
        return [bytes(chunk) async for chunk in response.streaming_content]

    return b"".join(async_to_sync(collect)())


def ndjson(body: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in body.splitlines() if line]


def subscribed(proxy: Proxy, topic: str, **config: Any) -> str:
    instance = create(proxy, group(), **config)
    assert proxy.post(f"{instance}/subscription", {"topics": [topic]}).status_code == 204
    return instance


def test_a_stream_carries_what_was_produced_in_order_with_headers_and_timestamps(
        proxy: Proxy, proxy_cluster: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(partitions=2)
    producer = Producer({"bootstrap.servers": proxy_cluster})
    # A minute ago: records older than retention.ms (7 days) go at the broker's next
    # retention check, which on a long-lived cluster can fall before the read.
    stamp = (int(time.time()) - 60) * 1000
    for partition in range(2):
        for i in range(10):
            producer.produce(topic, key=json.dumps(f"k{i}"), value=json.dumps([partition, i]),
                             partition=partition, timestamp=stamp + i,
                             headers=[("trace", b"t%d" % i)])
    producer.flush(10)
    instance = subscribed(proxy, topic, **{"auto.commit.enable": "false"})
    response = proxy.get(f"{instance}/records/stream?max_records=20&timeout=15000", accept=JSON)
    assert response["Content-Type"] == "application/x-ndjson"
    records = ndjson(read_stream(response))
    assert len(records) == 20
    for partition in range(2):
        mine = [r for r in records if r["partition"] == partition]
        assert [r["offset"] for r in mine] == list(range(10))
        assert [r["value"] for r in mine] == [[partition, i] for i in range(10)]
        assert [r["key"] for r in mine] == [f"k{i}" for i in range(10)]
        assert [r["timestamp"] for r in mine] == [stamp + i for i in range(10)]
        assert [r["headers"] for r in mine] == [
            [{"name": "trace", "value": base64.b64encode(b"t%d" % i).decode()}]
            for i in range(10)]
    # Streamed records count as consumed: a plain commit covers them.
    assert proxy.post(f"{instance}/offsets").status_code == 204
    partitions = {"partitions": [{"topic": topic, "partition": p} for p in range(2)]}
    committed = proxy.get(f"{instance}/offsets", body=partitions).json()["offsets"]
    assert sorted(o["offset"] for o in committed) == [10, 10]
    proxy.delete(instance)


def test_a_stream_stops_at_max_bytes_and_leaves_the_rest_for_the_next_read(
        proxy: Proxy, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    produce_json(proxy, topic, ["a" * 8] * 5)  # each value is 10 bytes of JSON
    instance = subscribed(proxy, topic)
    first = ndjson(read_stream(proxy.get(f"{instance}/records/stream?max_bytes=25&timeout=10000")))
    assert [r["offset"] for r in first] == [0, 1]
    assert [r["offset"] for r in fetch_until(proxy, instance, 3)] == [2, 3, 4]
    started = time.monotonic()
    assert read_stream(proxy.get(f"{instance}/records/stream?timeout=300")) == b""
    assert time.monotonic() - started < 5
    proxy.delete(instance)


def test_a_stream_can_be_server_sent_events(proxy: Proxy, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    produce_json(proxy, topic, [{"n": 1}, {"n": 2}])
    instance = subscribed(proxy, topic)
    response = proxy.get(f"{instance}/records/stream?max_records=2&timeout=10000",
                         accept="text/event-stream")
    assert response["Content-Type"] == "text/event-stream"
    events = [e for e in read_stream(response).decode().split("\n\n") if e]
    assert [e.splitlines()[0] for e in events] == [f"id: {topic}/0/0", f"id: {topic}/0/1"]
    assert [json.loads(e.splitlines()[1].removeprefix("data: "))["value"] for e in events] == [
        {"n": 1}, {"n": 2}]
    proxy.delete(instance)


def test_stream_mistakes_are_confluent_errors(proxy: Proxy) -> None:
    missing = proxy.get(f"consumers/{group()}/instances/nobody/records/stream")
    assert (missing.status_code, missing.json()["error_code"]) == (404, 40403)
    instance = create(proxy, group())
    mismatch = proxy.get(f"{instance}/records/stream", accept=BINARY)
    assert (mismatch.status_code, mismatch.json()["error_code"]) == (406, 40601)
    assert proxy.get(f"{instance}/records/stream", accept=AVRO).json()["error_code"] == 40601
    assert proxy.get(f"{instance}/records/stream", accept="text/html").status_code == 406
    bad = proxy.get(f"{instance}/records/stream?max_records=many")
    assert (bad.status_code, bad.json()["error_code"]) == (422, 42206)
    proxy.delete(instance)


def test_a_streaming_instance_does_not_expire_and_deleting_it_ends_the_stream(
        proxy: Proxy, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    instance = subscribed(proxy, topic)
    g, name = instance.split("/")[1], instance.split("/")[3]
    response = proxy.get(f"{instance}/records/stream?timeout=15000")
    body: list[bytes] = []
    reader = threading.Thread(target=lambda: body.append(read_stream(response)))
    reader.start()
    deadline = time.monotonic() + 5
    found = manager().locate(g, name, forwarded=False).instance
    assert found is not None
    while not found.busy and time.monotonic() < deadline:
        time.sleep(0.02)
    assert found not in manager().expire_idle(now=time.monotonic() + 3600)
    started = time.monotonic()
    assert proxy.delete(instance).status_code == 204
    reader.join(5)
    assert not reader.is_alive() and time.monotonic() - started < 3
    assert ndjson(body[0]) == [{"error_code": 40403, "message":
                                f"Consumer instance {name} of group {g} not found."}]


def test_a_finished_stream_lets_the_instance_expire(proxy: Proxy) -> None:
    instance = create(proxy, f"g-{uuid.uuid4().hex[:8]}")
    assert read_stream(proxy.get(f"{instance}/records/stream?timeout=100")) == b""
    g, name = instance.split("/")[1], instance.split("/")[3]
    expired = manager().expire_idle(now=time.monotonic() + 3600)
    assert (g, name) in [(i.group, i.name) for i in expired]
