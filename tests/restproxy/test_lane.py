"""The fast lane (millrace/asgi.py, restproxy/lane.py) answers produce and fetch as
Django's handler does: each request goes through both, in-process over ASGI, against the
session broker; status and headers are equal, and the bodies once offsets and timestamps
(which differ between two produces) are set aside, and so are partitions, which the
partitioner chooses. The lane must have answered itself."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.conf import settings

from millrace.asgi import ApiHandler, FastLane
from registry import lane as registry_lane
from restproxy import lane as proxy_lane

from .conftest import BINARY, JSON, V2

BASE = "http://127.0.0.1/" + settings.RESTPROXY_PREFIX.rstrip("/")
VALUE = base64.b64encode(b"lane").decode()


class CountingDjango(ApiHandler):
    served = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        type(self).served += 1
        await super().__call__(scope, receive, send)


django = CountingDjango()
fast = FastLane(django, [
    (settings.REGISTRY_PORT, settings.REGISTRY_PREFIX, registry_lane.routes()),
    (settings.RESTPROXY_PORT, settings.RESTPROXY_PREFIX, proxy_lane.routes()),
])


def call(app: Any, method: str, path: str, body: Any = None, **headers: str) -> httpx.Response:
    content = body if isinstance(body, str | bytes | None) else json.dumps(body)

    async def send() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as client:
            return await client.request(method, BASE + path, content=content,
                                        headers={k.replace("_", "-"): v
                                                 for k, v in headers.items()})

    return async_to_sync(send)()


def varying(content: bytes) -> bytes:
    names = rb"offset|timestamp|partition|partition_id"
    return re.sub(rb'"(' + names + rb')": ?("[^"]*"|\d+)', rb'"\1": X', content)


def both(method: str, path: str, body: Any = None, **headers: str) -> tuple[httpx.Response, int]:
    before = CountingDjango.served
    expected = call(django, method, path, body, **headers)
    got = call(fast, method, path, body, **headers)
    assert got.status_code == expected.status_code, (got.content, expected.content)
    assert varying(got.content) == varying(expected.content)
    # The two answers name different offsets (the records were written twice), so their
    # lengths may differ by a digit: each length must be its own body's, the rest the same.
    for response in (got, expected):
        length = response.headers.get("content-length")
        assert length is None or int(length) == len(response.content)
    assert ({k: v for k, v in got.headers.items() if k != "content-length"}
            == {k: v for k, v in expected.headers.items() if k != "content-length"}) or (
        got.headers.get("transfer-encoding") == "chunked")  # a stream's length varies
    assert ("content-length" in got.headers) == ("content-length" in expected.headers) or (
        got.headers.get("transfer-encoding") == "chunked")
    return got, CountingDjango.served - before


@pytest.fixture
def cluster_path(proxy_cluster: str) -> str:
    body = call(django, "GET", "/v3/clusters").json()
    return f"/v3/clusters/{body['data'][0]['cluster_id']}"


def test_produce_answers_from_the_lane_as_django_does(
        cluster_path: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(2)
    records = {"records": [{"value": VALUE}, {"value": VALUE}]}
    one = {"value": {"type": "BINARY", "data": VALUE}}
    for method, path, body, content_type in [
        ("POST", f"/topics/{topic}", records, BINARY),
        ("POST", f"/topics/{topic}/", records, BINARY),
        ("POST", f"/topics/{topic}", {"records": [{"value": {"a": 1}}]}, JSON),
        ("POST", f"/topics/{topic}/partitions/1", {"records": [{"value": VALUE}]}, BINARY),
        ("POST", f"{cluster_path}/topics/{topic}/records", one, "application/json"),
        ("POST", f"{cluster_path}/topics/{topic}/records",
         json.dumps(one) + json.dumps(one), "application/json"),
    ]:
        response, by_django = both(method, path, body, content_type=content_type)
        assert response.status_code == 200, response.content
        assert by_django == 1, f"{method} {path} was not answered by the lane"
    to_one, _ = both("POST", f"/topics/{topic}", {"records": [{"value": VALUE, "partition": 1}]},
                     content_type=BINARY)
    assert to_one.json()["offsets"][0]["partition"] == 1


def test_refused_produce_requests_get_django_s_answer(
        cluster_path: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    for path, body, content_type in [
        (f"/topics/{topic}", {"records": [{"value": "not base64!"}]}, BINARY),
        (f"/topics/{topic}", {"records": "nope"}, BINARY),
        (f"/topics/{topic}", "{oops", BINARY),
        (f"/topics/{topic}", {"records": [{"value": VALUE}]}, "text/plain"),
        (f"/topics/{topic}/partitions/9", {"records": [{"value": VALUE}]}, BINARY),
        ("/topics/no-such-topic-here", {"records": [{"value": VALUE}]}, BINARY),
        ("/v3/clusters/other/topics/t/records", {"value": {"data": VALUE}}, "application/json"),
        (f"{cluster_path}/topics/{topic}/records", {"value": {"type": "NOPE"}}, "application/json"),
    ]:
        response, _ = both("POST", path, body, content_type=content_type)
        assert response.status_code >= 400, (path, response.content)


def test_a_fetch_from_an_instance_here_answers_from_the_lane(
        proxy_cluster: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    call(django, "POST", f"/topics/{topic}", {"records": [{"value": VALUE}] * 4},
         content_type=BINARY).raise_for_status()
    config = {"format": "binary", "auto.offset.reset": "earliest"}
    created = call(django, "POST", "/consumers/lane-group", config, content_type=V2).json()
    instance = f"/consumers/lane-group/instances/{created['instance_id']}"
    call(django, "POST", f"{instance}/assignments",
         {"partitions": [{"topic": topic, "partition": 0}]}, content_type=V2).raise_for_status()
    try:
        before = CountingDjango.served
        fetched = call(fast, "GET", f"{instance}/records?timeout=5000", accept=BINARY)
        assert CountingDjango.served == before
        assert fetched.headers["content-type"] == BINARY
        assert [r["value"] for r in fetched.json()] == [VALUE] * 4
        empty, by_django = both("GET", f"{instance}/records?timeout=10", accept=BINARY)
        assert empty.json() == [] and by_django == 1
        mismatch, _ = both("GET", f"{instance}/records", accept=JSON)
        assert mismatch.json()["error_code"] == 40601
    finally:
        call(django, "DELETE", instance, content_type=V2)


def test_a_stream_s_report_lines_are_the_json_of_its_reports() -> None:
    from confluent_kafka import KafkaError

    from restproxy import errors, records
    from restproxy.client import OutgoingRecord, PendingBatch
    from restproxy.v3.produce import report, report_line

    entries: list[records.V3Entry | errors.RestProxyError] = [
        records.V3Entry(OutgoingRecord(b"v", b"key"), "STRING", "BINARY"),
        records.V3Entry(OutgoingRecord(None, None), None, "JSON"),
        records.V3Entry(OutgoingRecord(b"{}", None), None, "AVRO"),
        errors.bad_request("Malformed JSON record"),
        records.V3Entry(OutgoingRecord(b"v"), None, "BINARY"),
    ]
    batch = PendingBatch(len(entries))

    class Delivered:
        def __init__(self, partition: int, offset: int, ms: int) -> None:
            self.values = partition, offset, ms

        def partition(self) -> int:
            return self.values[0]

        def offset(self) -> int:
            return self.values[1]

        def timestamp(self) -> tuple[int, int]:
            return 1, self.values[2]

    batch.delivered(0, None, Delivered(3, 41, 1_700_000_000_123))
    batch.delivered(1, None, Delivered(0, 0, -1))
    batch.delivered(2, None, Delivered(1, 2**40, 0))
    batch.complete(3)
    batch.fail(4, KafkaError(KafkaError._MSG_TIMED_OUT))
    head = json.dumps({"error_code": 200, "cluster_id": "c-1", "topic_name": "t.x"})[:-1]
    for index, entry in enumerate(entries):
        expected = json.dumps(report("c-1", "t.x", entry, batch, index)) + "\n"
        assert report_line(head, "c-1", "t.x", entry, batch, index) == expected
