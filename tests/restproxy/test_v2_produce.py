"""v2 metadata and produce over the built-in broker."""

from __future__ import annotations

import base64
from collections.abc import Callable

from tests.restproxy.conftest import BINARY, JSON, Proxy


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_it_lists_topics_and_brokers(proxy: Proxy, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    response = proxy.get("topics")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/vnd.kafka.v2+json"
    assert topic in response.json()
    assert proxy.get("brokers/").json() == {"brokers": [1]}


def test_it_describes_a_topic_and_its_partitions(proxy: Proxy,
                                                 new_topic: Callable[..., str]) -> None:
    topic = new_topic(partitions=2)
    body = proxy.get(f"topics/{topic}").json()
    assert body["name"] == topic
    assert [p["partition"] for p in body["partitions"]] == [0, 1]
    assert body["partitions"][0]["replicas"] == [{"broker": 1, "leader": True, "in_sync": True}]
    assert proxy.get(f"topics/{topic}/partitions/1").json()["partition"] == 1
    assert len(proxy.get(f"topics/{topic}/partitions").json()) == 2


def test_unknown_topic_and_partition_are_40401_and_40402(proxy: Proxy,
                                                         new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    assert proxy.get("topics/no-such-topic").json()["error_code"] == 40401
    response = proxy.get(f"topics/{topic}/partitions/7")
    assert (response.status_code, response.json()["error_code"]) == (404, 40402)
    response = proxy.post("topics/no-such-topic", {"records": [{"value": "YQ=="}]},
                          content_type=BINARY)
    assert response.json()["error_code"] == 40401


def test_it_produces_binary_and_reports_offsets(proxy: Proxy,
                                                new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    records = [{"key": b64(b"k"), "value": b64(b"v%d" % i)} for i in range(3)]
    response = proxy.post(f"topics/{topic}", {"records": records}, content_type=BINARY)
    assert response.status_code == 200, response.content
    body = response.json()
    assert [o["offset"] for o in body["offsets"]] == [0, 1, 2]
    assert all(o["error_code"] is None for o in body["offsets"])
    assert body["key_schema_id"] is None
    offsets = proxy.get(f"topics/{topic}/partitions/0/offsets").json()
    assert offsets == {"beginning_offset": 0, "end_offset": 3}


def test_it_produces_json_to_a_partition(proxy: Proxy, new_topic: Callable[..., str]) -> None:
    topic = new_topic(partitions=3)
    response = proxy.post(f"topics/{topic}/partitions/2/",
                          {"records": [{"value": {"a": [1, 2]}}, {"value": "x"}]},
                          content_type=JSON)
    assert [o["partition"] for o in response.json()["offsets"]] == [2, 2]


def test_an_oversized_record_gets_a_per_record_error(proxy: Proxy,
                                                     new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    big = b64(b"x" * 2_000_000)
    response = proxy.post(f"topics/{topic}",
                          {"records": [{"value": b64(b"small")}, {"value": big}]},
                          content_type=BINARY)
    assert response.status_code == 200
    first, second = response.json()["offsets"]
    assert first["error_code"] is None
    assert second["error_code"] == 1 and second["error"]


def test_client_mistakes_are_4xx(proxy: Proxy, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    bad_json = proxy.post(f"topics/{topic}", raw=b"{not json", content_type=BINARY)
    assert (bad_json.status_code, bad_json.json()["error_code"]) == (400, 400)
    bad_b64 = proxy.post(f"topics/{topic}", {"records": [{"value": "%%%"}]}, content_type=BINARY)
    assert bad_b64.json()["error_code"] == 42206
    no_records = proxy.post(f"topics/{topic}", {"recs": []}, content_type=BINARY)
    assert no_records.json()["error_code"] == 42206
    wrong_type = proxy.post(f"topics/{topic}", {"records": []}, content_type="text/plain")
    assert (wrong_type.status_code, wrong_type.json()["error_code"]) == (415, 415)
    not_acceptable = proxy.get("topics", accept="text/html")
    assert (not_acceptable.status_code, not_acceptable.json()["error_code"]) == (406, 406)
    assert proxy.post(f"topics/{topic}/partitions/x", {"records": []},
                      content_type=BINARY).status_code == 404


def test_it_refuses_bodies_above_the_limit(proxy: Proxy, new_topic: Callable[..., str],
                                           settings: object) -> None:
    topic = new_topic()
    settings.RESTPROXY_MAX_REQUEST_BYTES = 1000  # type: ignore[attr-defined]
    response = proxy.post(f"topics/{topic}", {"records": [{"value": b64(b"x" * 2000)}]},
                          content_type=BINARY)
    assert (response.status_code, response.json()["error_code"]) == (413, 413)
    assert proxy.get(f"topics/{topic}/partitions/0/offsets").json()["end_offset"] == 0
