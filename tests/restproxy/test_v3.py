"""v3 admin and produce endpoints over the built-in broker."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Callable

from confluent_kafka import Consumer, TopicPartition

from tests.restproxy.conftest import Proxy

APP = "application/json"


def cluster_path(proxy: Proxy) -> str:
    body = proxy.get("v3/clusters", content_type=APP).json()
    assert body["kind"] == "KafkaClusterList"
    return f"v3/clusters/{body['data'][0]['cluster_id']}"


def test_cluster_and_brokers(proxy: Proxy) -> None:
    base = cluster_path(proxy)
    cluster = proxy.get(base + "/").json()
    assert cluster["kind"] == "KafkaCluster"
    assert cluster["metadata"]["self"].endswith(base)
    assert cluster["topics"]["related"].endswith(base + "/topics")
    brokers = proxy.get(f"{base}/brokers").json()
    assert [b["broker_id"] for b in brokers["data"]] == [1]
    assert proxy.get(f"{base}/brokers/1").json()["host"] == "127.0.0.1"
    assert proxy.get(f"{base}/brokers/9").status_code == 404
    assert proxy.get("v3/clusters/nope/topics").status_code == 404
    configs = proxy.get(f"{base}/brokers/1/configs").json()
    assert configs["kind"] == "KafkaBrokerConfigList"


def test_topic_crud_and_configs(proxy: Proxy) -> None:
    base = cluster_path(proxy)
    name = f"v3-{uuid.uuid4().hex[:8]}"
    body = {"topic_name": name, "partitions_count": 2, "replication_factor": 1,
            "configs": [{"name": "cleanup.policy", "value": "compact"}]}
    dry = proxy.post(f"{base}/topics", {**body, "validate_only": True}, content_type=APP)
    assert dry.status_code == 201, dry.content
    assert proxy.get(f"{base}/topics/{name}").status_code == 404
    created = proxy.post(f"{base}/topics", body, content_type=APP)
    assert created.status_code == 201, created.content
    assert created.json()["partitions_count"] == 2
    again = proxy.post(f"{base}/topics", body, content_type=APP)
    assert (again.status_code, again.json()["error_code"]) == (400, 40002)
    config = proxy.get(f"{base}/topics/{name}/configs/cleanup.policy").json()
    assert config["value"] == "compact" and config["kind"] == "KafkaTopicConfig"
    put = proxy.request("PUT", f"{base}/topics/{name}/configs/retention.ms",
                        {"value": "1000"}, content_type=APP)
    assert put.status_code == 204, put.content
    assert proxy.get(f"{base}/topics/{name}/configs/retention.ms").json()["value"] == "1000"
    alter = proxy.post(f"{base}/topics/{name}/configs:alter", {"data": [
        {"name": "retention.ms", "operation": "DELETE"},
        {"name": "cleanup.policy", "value": "delete"}]}, content_type=APP)
    assert alter.status_code == 204, alter.content
    configs = {c["name"]: c for c in proxy.get(f"{base}/topics/{name}/configs").json()["data"]}
    assert configs["cleanup.policy"]["value"] == "delete"
    assert configs["retention.ms"]["is_default"]
    partitions = proxy.get(f"{base}/topics/{name}/partitions").json()["data"]
    assert [p["partition_id"] for p in partitions] == [0, 1]
    replicas = proxy.get(f"{base}/topics/{name}/partitions/1/replicas").json()["data"]
    assert replicas[0]["is_leader"] and replicas[0]["is_in_sync"]
    assert proxy.get(f"{base}/topics/{name}/partitions/5").json()["error_code"] == 40402
    assert proxy.delete(f"{base}/topics/{name}").status_code == 204
    assert proxy.get(f"{base}/topics/{name}").json()["error_code"] == 40401


def test_produce_one_record_with_headers_and_timestamp(
        proxy: Proxy, new_topic: Callable[..., str], proxy_cluster: str) -> None:
    base, topic = cluster_path(proxy), new_topic()
    # Milliseconds of a minute ago: a record older than retention.ms (7 days) goes at the
    # broker's next retention check, which on a long-lived cluster can fall before the read.
    stamp_ms = (int(time.time()) - 60) * 1000 + 6
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(stamp_ms // 1000)) + ".006Z"
    record = {"key": {"type": "STRING", "data": "k"}, "value": {"type": "JSON", "data": {"a": 1}},
              "headers": [{"name": "h", "value": base64.b64encode(b"hv").decode()}],
              "timestamp": stamp}
    response = proxy.post(f"{base}/topics/{topic}/records", record, content_type=APP)
    assert response.status_code == 200, response.content
    report = response.json()
    assert report["error_code"] == 200 and report["offset"] == 0
    assert report["timestamp"] == stamp
    assert report["value"] == {"type": "JSON", "size": 7}
    consumer = Consumer({"bootstrap.servers": proxy_cluster, "group.id": "v3-check"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    message = consumer.poll(10)
    consumer.close()
    assert message is not None and message.value() == b'{"a":1}' and message.key() == b"k"
    assert message.headers() == [("h", b"hv")]
    assert message.timestamp()[1] == stamp_ms


def test_streaming_produce_reports_every_record_in_order(
        proxy: Proxy, new_topic: Callable[..., str]) -> None:
    base, topic = cluster_path(proxy), new_topic(partitions=3)
    count = 10_000
    body = "".join(json.dumps({"partition_id": i % 3, "value": {"type": "JSON", "data": i}})
                   for i in range(count)).encode()
    started = time.monotonic()
    response = proxy.post(f"{base}/topics/{topic}/records", raw=body, content_type=APP)
    lines = b"".join(response).decode().splitlines()
    assert response.status_code == 200
    reports = [json.loads(line) for line in lines]
    assert len(reports) == count
    assert all(r["error_code"] == 200 for r in reports)
    assert [r["partition_id"] for r in reports] == [i % 3 for i in range(count)]
    assert [r["offset"] for r in reports] == [i // 3 for i in range(count)]
    assert time.monotonic() - started < 60


def test_stream_with_bad_records_reports_errors_in_place(
        proxy: Proxy, new_topic: Callable[..., str]) -> None:
    base, topic = cluster_path(proxy), new_topic()
    body = (json.dumps({"value": {"type": "JSON", "data": 1}})
            + json.dumps({"value": {"type": "NOPE", "data": 1}})
            + json.dumps({"partition_id": 9, "value": {"type": "JSON", "data": 3}})
            + json.dumps({"value": {"type": "BINARY", "data": "AA=="}}))
    response = proxy.post(f"{base}/topics/{topic}/records", raw=body.encode(), content_type=APP)
    reports = [json.loads(x) for x in b"".join(response).splitlines()]
    assert [r["error_code"] for r in reports] == [200, 400, 404, 200]
    assert [r.get("offset") for r in reports] == [0, None, None, 1]


def test_records_batch_answers_207(proxy: Proxy, new_topic: Callable[..., str]) -> None:
    base, topic = cluster_path(proxy), new_topic()
    entries = [{"id": "a", "value": {"type": "STRING", "data": "x"}},
               {"id": "b", "value": {"type": "BINARY", "data": "!!"}}]
    response = proxy.post(f"{base}/topics/{topic}/records:batch", {"entries": entries},
                          content_type=APP)
    assert response.status_code == 207, response.content
    body = response.json()
    assert [s["id"] for s in body["successes"]] == ["a"]
    assert [f["id"] for f in body["failures"]] == ["b"]
    too_many = {"entries": [{"id": str(i), "value": None} for i in range(11)]}
    invalid = proxy.post(f"{base}/topics/{topic}/records:batch", too_many, content_type=APP)
    assert (invalid.status_code, invalid.json()["error_code"]) == (422, 42208)


def test_single_record_mistakes(proxy: Proxy, new_topic: Callable[..., str]) -> None:
    base, topic = cluster_path(proxy), new_topic()
    url = f"{base}/topics/{topic}/records"
    assert proxy.post(url, raw=b"{oops", content_type=APP).status_code == 400
    missing = proxy.post(f"{base}/topics/none-such/records", {"value": None}, content_type=APP)
    assert missing.json()["error_code"] == 40401
    big = {"value": {"type": "BINARY", "data": base64.b64encode(b"x" * 2_000_000).decode()}}
    too_big = proxy.post(url, big, content_type=APP)
    assert (too_big.status_code, too_big.json()["error_code"]) == (400, 400)


def test_consumer_groups_consumers_and_lags(
        proxy: Proxy, new_topic: Callable[..., str], proxy_cluster: str) -> None:
    base, topic = cluster_path(proxy), new_topic(partitions=2)
    for partition in (0, 1):
        proxy.post(f"{base}/topics/{topic}/records:batch", {"entries": [
            {"id": str(i), "partition_id": partition, "value": {"type": "STRING", "data": "v"}}
            for i in range(5)]}, content_type=APP)
    group = f"lag-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({"bootstrap.servers": proxy_cluster, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    deadline = time.monotonic() + 20
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)
    consumer.commit(offsets=[TopicPartition(topic, 0, 2), TopicPartition(topic, 1, 5)],
                    asynchronous=False)
    try:
        groups = proxy.get(f"{base}/consumer-groups").json()
        assert group in [g["consumer_group_id"] for g in groups["data"]]
        detail = proxy.get(f"{base}/consumer-groups/{group}").json()
        assert detail["kind"] == "KafkaConsumerGroup" and detail["state"] == "STABLE"
        consumers = proxy.get(f"{base}/consumer-groups/{group}/consumers").json()["data"]
        assert len(consumers) == 1
        consumer_id = consumers[0]["consumer_id"]
        assignments = proxy.get(
            f"{base}/consumer-groups/{group}/consumers/{consumer_id}/assignments").json()
        assert sorted(a["partition_id"] for a in assignments["data"]) == [0, 1]
        lags = proxy.get(f"{base}/consumer-groups/{group}/lags").json()["data"]
        assert [(r["partition_id"], r["lag"]) for r in lags] == [(0, 3), (1, 0)]
        assert lags[0]["consumer_id"] == consumer_id
        one = proxy.get(f"{base}/consumer-groups/{group}/lags/{topic}/partitions/0").json()
        assert one["current_offset"] == 2 and one["log_end_offset"] == 5
        summary = proxy.get(f"{base}/consumer-groups/{group}/lag-summary").json()
        assert (summary["max_lag"], summary["total_lag"]) == (3, 3)
        assert summary["max_lag_partition_id"] == 0
    finally:
        consumer.close()


def test_a_stream_s_records_parse_the_same_however_its_bytes_are_cut() -> None:
    from restproxy.errors import RestProxyError
    from restproxy.v3.produce import JsonValues, split_json_values

    body = '{"value": "é€"} 12 {"a": [1, {"b": "}"}]}\n-3.5e2 "s" true {"v": 1} {oops'.encode()
    whole = split_json_values(body)
    assert whole[:-1] == [{"value": "é€"}, 12, {"a": [1, {"b": "}"}]}, -350.0, "s", True,
                          {"v": 1}]
    assert isinstance(whole[-1], RestProxyError) and whole[-1].status == 400
    for cut in range(len(body) + 1):
        values = JsonValues(1000)
        got = values.feed(body[:cut], final=False) + values.feed(body[cut:], final=True)
        assert got[:-1] == whole[:-1], cut
        assert isinstance(got[-1], RestProxyError)
    unfinished = JsonValues(10)  # a record may not outgrow the limit while it waits
    first, too_long = unfinished.feed(b'{"v": 1} {"value": "0123456789', final=False)
    assert first == {"v": 1} and too_long.status == 413
    assert unfinished.feed(b'"}', final=True) == []
