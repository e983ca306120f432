"""A topic with fewer replicas than its min.insync.replicas takes no acks=all write. The
proxy, which produces with acks=all, answers each record at once with the broker's refusal
(NOT_ENOUGH_REPLICAS) in Confluent's shape, instead of the producer's 30 s time-out
("Local: Message timed out"); v3 topic creation accepts such a topic and warns."""

from __future__ import annotations

import json
import uuid

from confluent_kafka.admin import AdminClient, NewTopic

from tests.restproxy.conftest import JSON, Proxy
from tests.restproxy.test_v3 import APP, cluster_path

SHORT = "replication factor 1, below its min.insync.replicas (2)"


def short_topic(admin: AdminClient) -> str:
    name = f"rp-short-{uuid.uuid4().hex[:10]}"
    new = NewTopic(name, 1, 1, config={"min.insync.replicas": "2"})
    for future in admin.create_topics([new]).values():
        future.result(15)
    return name


def test_v2_records_to_a_topic_no_write_can_reach_are_refused_at_once(
        proxy: Proxy, admin: AdminClient) -> None:
    topic = short_topic(admin)
    response = proxy.post(f"topics/{topic}", {"records": [{"value": {"a": 1}}, {"value": 2}]},
                          content_type=JSON)
    assert response.status_code == 200, response.content
    offsets = response.json()["offsets"]
    assert [o["offset"] for o in offsets] == [None, None]
    # 1: retrying will not help (Confluent's v2 code), as the topic stays short of replicas
    assert all(o["error_code"] == 1 and SHORT in o["error"] for o in offsets), offsets


def test_v3_records_one_or_streamed_are_refused_at_once(proxy: Proxy, admin: AdminClient) -> None:
    base, topic = cluster_path(proxy), short_topic(admin)
    url = f"{base}/topics/{topic}/records"
    one = proxy.post(url, {"value": {"type": "JSON", "data": 1}}, content_type=APP)
    assert one.status_code == 500 and SHORT in one.json()["message"], one.content
    body = "".join(json.dumps({"value": {"type": "JSON", "data": i}}) for i in range(3))
    streamed = proxy.post(url, raw=body.encode(), content_type=APP)
    reports = [json.loads(line) for line in b"".join(streamed).splitlines()]
    assert len(reports) == 3 and all(SHORT in r["message"] for r in reports), reports


def test_v3_creates_such_a_topic_and_warns(proxy: Proxy) -> None:
    base, name = cluster_path(proxy), f"rp-short-{uuid.uuid4().hex[:10]}"
    body = {"topic_name": name, "partitions_count": 1, "replication_factor": 1,
            "configs": [{"name": "min.insync.replicas", "value": "2"}]}
    created = proxy.post(f"{base}/topics", body, content_type=APP)
    assert created.status_code == 201, created.content
    (warning,) = created.json()["warnings"]
    assert SHORT in warning and "acks=all" in warning
    ordinary = proxy.post(f"{base}/topics", {"topic_name": f"{name}-ok"}, content_type=APP)
    assert ordinary.status_code == 201 and "warnings" not in ordinary.json()
