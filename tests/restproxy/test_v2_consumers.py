"""v2 consumer instances over the built-in broker."""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from restproxy.instances.manager import manager
from tests.restproxy.conftest import BINARY, JSON, Proxy


def produce_json(proxy: Proxy, topic: str, values: list[Any], partition: int | None = None) -> None:
    path = f"topics/{topic}" if partition is None else f"topics/{topic}/partitions/{partition}"
    response = proxy.post(path, {"records": [{"value": v} for v in values]}, content_type=JSON)
    assert response.status_code == 200, response.content


def create(proxy: Proxy, group: str, **config: Any) -> str:
    body = {"format": "json", "auto.offset.reset": "earliest", **config}
    response = proxy.post(f"consumers/{group}", body)
    assert response.status_code == 200, response.content
    base_uri = response.json()["base_uri"]
    assert base_uri.endswith(f"consumers/{group}/instances/{response.json()['instance_id']}")
    return f"consumers/{group}/instances/{response.json()['instance_id']}"


def fetch_until(proxy: Proxy, instance: str, count: int, accept: str = JSON,
                deadline: float = 15.0) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    stop = time.monotonic() + deadline
    while len(records) < count and time.monotonic() < stop:
        response = proxy.get(f"{instance}/records?timeout=500", accept=accept)
        assert response.status_code == 200, response.content
        records += response.json()
    return records


def group() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


def test_a_consume_reads_back_exactly_what_was_produced(
        proxy: Proxy, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    values = [{"n": i, "text": "é"} for i in range(50)]
    produce_json(proxy, topic, values)
    instance = create(proxy, group())
    assert proxy.post(f"{instance}/subscription", {"topics": [topic]}).status_code == 204
    assert proxy.get(f"{instance}/subscription").json() == {"topics": [topic]}
    records = fetch_until(proxy, instance, 50)
    assert [r["value"] for r in records] == values
    assert [r["offset"] for r in records] == list(range(50))
    assert all(r["topic"] == topic and r["timestamp"] > 0 for r in records)
    assert proxy.delete(instance).status_code == 204
    assert proxy.get(f"{instance}/records", accept=JSON).json()["error_code"] == 40403


def test_manual_assignment_seek_and_commit(proxy: Proxy, new_topic: Callable[..., str]) -> None:
    topic = new_topic(partitions=2)
    produce_json(proxy, topic, list(range(10)), partition=1)
    instance = create(proxy, group(), **{"auto.commit.enable": "false"})
    partitions = {"partitions": [{"topic": topic, "partition": 1}]}
    assert proxy.post(f"{instance}/assignments/", partitions).status_code == 204
    assert proxy.get(f"{instance}/assignments").json() == partitions
    seek = {"offsets": [{"topic": topic, "partition": 1, "offset": 6}]}
    assert proxy.post(f"{instance}/positions", seek).status_code == 204
    assert [r["value"] for r in fetch_until(proxy, instance, 4)] == [6, 7, 8, 9]
    assert proxy.post(f"{instance}/positions/beginning", partitions).status_code == 204
    assert [r["value"] for r in fetch_until(proxy, instance, 10)] == list(range(10))
    assert proxy.post(f"{instance}/offsets").status_code == 204
    committed = proxy.get(f"{instance}/offsets", body=partitions).json()
    assert committed["offsets"][0]["offset"] == 10
    explicit = {"offsets": [{"topic": topic, "partition": 1, "offset": 3}]}
    assert proxy.post(f"{instance}/offsets", explicit).status_code == 204
    assert proxy.get(f"{instance}/offsets", body=partitions).json()["offsets"][0]["offset"] == 3
    assert proxy.get(f"{instance}/offsets").json()["error_code"] == 40402
    assert proxy.post(f"{instance}/positions/end", partitions).status_code == 204
    produce_json(proxy, topic, ["after"], partition=1)
    assert [r["value"] for r in fetch_until(proxy, instance, 1)] == ["after"]
    proxy.delete(instance)


def test_seek_to_timestamps(proxy: Proxy, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    produce_json(proxy, topic, ["old"])
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    produce_json(proxy, topic, ["new"])
    instance = create(proxy, group())
    proxy.post(f"{instance}/assignments", {"partitions": [{"topic": topic, "partition": 0}]})
    stamps = {"timestamps": [{"topic": topic, "partition": 0, "timestamp": middle}]}
    assert proxy.post(f"{instance}/positions", stamps).status_code == 204
    assert [r["value"] for r in fetch_until(proxy, instance, 1)] == ["new"]
    proxy.delete(instance)


def test_binary_records_carry_headers_and_need_the_right_accept(
        proxy: Proxy, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    value = base64.b64encode(b"\x00\x01raw").decode()
    proxy.post(f"topics/{topic}", {"records": [{"value": value}]}, content_type=BINARY)
    instance = create(proxy, group(), format="binary")
    proxy.post(f"{instance}/subscription", {"topics": [topic]})
    mismatch = proxy.get(f"{instance}/records", accept=JSON)
    assert (mismatch.status_code, mismatch.json()["error_code"]) == (406, 40601)
    records = fetch_until(proxy, instance, 1, accept=BINARY)
    assert records[0]["value"] == value and records[0]["key"] is None
    assert records[0]["headers"] == []
    proxy.delete(instance)


def test_consumer_mistakes(proxy: Proxy, new_topic: Callable[..., str]) -> None:
    g = group()
    instance = create(proxy, g, name="one")
    duplicate = proxy.post(f"consumers/{g}", {"name": "one"})
    assert (duplicate.status_code, duplicate.json()["error_code"]) == (409, 40902)
    bad_format = proxy.post(f"consumers/{g}", {"format": "xml"})
    assert (bad_format.status_code, bad_format.json()["error_code"]) == (422, 42204)
    both = proxy.post(f"{instance}/subscription", {"topics": ["a"], "topic_pattern": "a.*"})
    assert both.json()["error_code"] == 40903
    proxy.post(f"{instance}/subscription", {"topics": ["a"]})
    assign = proxy.post(f"{instance}/assignments", {"partitions": [{"topic": "a", "partition": 0}]})
    assert assign.json()["error_code"] == 40903
    missing = proxy.post(f"consumers/{g}/instances/nobody/subscription", {"topics": ["a"]})
    assert (missing.status_code, missing.json()["error_code"]) == (404, 40403)
    proxy.delete(instance)


def test_two_instances_of_a_group_share_partitions(
        proxy: Proxy, new_topic: Callable[..., str]) -> None:
    topic = new_topic(partitions=4)
    g = group()
    first, second = create(proxy, g), create(proxy, g)
    for instance in (first, second):
        proxy.post(f"{instance}/subscription", {"topics": [topic]})
    deadline = time.monotonic() + 30
    sizes: list[int] = []
    while sizes != [2, 2] and time.monotonic() < deadline:
        sizes = [len(proxy.get(f"{i}/assignments").json()["partitions"]) for i in (first, second)]
        time.sleep(0.2)
    assert sizes == [2, 2]
    for partition in range(4):
        produce_json(proxy, topic, [f"{partition}-{i}" for i in range(5)], partition=partition)
    seen: dict[str, list[dict[str, Any]]] = {first: [], second: []}
    while sum(map(len, seen.values())) < 20 and time.monotonic() < deadline + 15:
        for instance in (first, second):
            seen[instance] += proxy.get(f"{instance}/records?timeout=200", accept=JSON).json()
    values = [r["value"] for records in seen.values() for r in records]
    assert sorted(values) == sorted(f"{p}-{i}" for p in range(4) for i in range(5))
    partitions = [{r["partition"] for r in seen[i]} for i in (first, second)]
    assert len(partitions[0]) == len(partitions[1]) == 2
    assert not partitions[0] & partitions[1]
    proxy.delete(first)
    proxy.delete(second)


@pytest.mark.parametrize("trail", ["", "/"])
def test_idle_instances_expire(proxy: Proxy, settings: Any, trail: str) -> None:
    settings.RESTPROXY_CONSUMER_INSTANCE_TIMEOUT_MS = 300
    instance = create(proxy, group())
    expired: list[Any] = []
    deadline = time.monotonic() + 10
    while not expired and time.monotonic() < deadline:
        expired = manager().expire_idle()
        time.sleep(0.1)
    response = proxy.get(f"{instance}/subscription{trail}")
    assert (response.status_code, response.json()["error_code"]) == (404, 40403)
