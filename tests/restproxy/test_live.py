"""The proxy behind real server processes: Avro and Protobuf through the registry,
forwarding between processes, chunked streaming produce, long polls that do not block other
requests."""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import h11
import httpx
import pytest

from tests.restproxy.conftest import AVRO, BINARY, JSON, PROTOBUF, V2
from tests.restproxy.live import proxy_servers


@pytest.fixture(scope="module")
def servers(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[list[str]]:
    data_dir: Path = tmp_path_factory.mktemp("restproxy-live")
    with proxy_servers(kafka_bootstrap, data_dir, processes=2) as urls:
        yield urls


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=60) as client:
        yield client


def create_consumer(http: httpx.Client, url: str, group: str, fmt: str) -> str:
    response = http.post(f"{url}/consumers/{group}", headers={"Content-Type": V2},
                         json={"format": fmt, "auto.offset.reset": "earliest"})
    assert response.status_code == 200, response.text
    base_uri = response.json()["base_uri"]
    assert base_uri.startswith(url)
    return str(base_uri)


def fetch(http: httpx.Client, base_uri: str, accept: str, count: int) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    deadline = time.monotonic() + 20
    while len(records) < count and time.monotonic() < deadline:
        response = http.get(f"{base_uri}/records", params={"timeout": 500},
                            headers={"Accept": accept})
        assert response.status_code == 200, response.text
        records += response.json()
    return records


def test_avro_round_trip_through_the_registry(
        servers: list[str], http: httpx.Client, new_topic: Callable[..., str]) -> None:
    url, topic = servers[0], new_topic()
    schema = {"type": "record", "name": "Reading",
              "fields": [{"name": "id", "type": "int"}, {"name": "label", "type": "string"}]}
    values = [{"id": i, "label": f"r{i}"} for i in range(5)]
    response = http.post(f"{url}/topics/{topic}", headers={"Content-Type": AVRO}, json={
        "value_schema": json.dumps(schema), "records": [{"value": v} for v in values[:3]]})
    assert response.status_code == 200, response.text
    schema_id = response.json()["value_schema_id"]
    assert isinstance(schema_id, int)
    again = http.post(f"{url}/topics/{topic}", headers={"Content-Type": AVRO}, json={
        "value_schema_id": schema_id, "records": [{"value": v} for v in values[3:]]})
    assert again.status_code == 200, again.text
    registered = http.get(f"{servers[2]}/subjects/{topic}-value/versions/1").json()
    assert registered["id"] == schema_id
    base_uri = create_consumer(http, url, f"avro-{uuid.uuid4().hex[:6]}", "avro")
    http.post(f"{base_uri}/subscription", headers={"Content-Type": V2}, json={"topics": [topic]})
    records = fetch(http, base_uri, AVRO, 5)
    assert [r["value"] for r in records] == values
    bad = http.post(f"{url}/topics/{topic}", headers={"Content-Type": AVRO},
                    json={"records": [{"value": {"id": 1}}]})
    assert bad.json()["error_code"] == 42202
    mismatch = http.post(f"{url}/topics/{topic}", headers={"Content-Type": AVRO}, json={
        "value_schema_id": schema_id, "records": [{"value": {"id": "nope"}}]})
    assert mismatch.status_code == 422
    http.delete(base_uri)


def test_v3_avro_by_schema_id(servers: list[str], http: httpx.Client,
                              new_topic: Callable[..., str]) -> None:
    url, topic = servers[0], new_topic()
    schema = json.dumps({"type": "string"})
    registered = http.post(f"{servers[2]}/subjects/{topic}-value/versions",
                           json={"schema": schema},
                           headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    schema_id = registered.json()["id"]
    cluster_id = http.get(f"{url}/v3/clusters").json()["data"][0]["cluster_id"]
    response = http.post(f"{url}/v3/clusters/{cluster_id}/topics/{topic}/records",
                         json={"value": {"schema_id": schema_id, "data": "hello"}})
    assert response.status_code == 200, response.text
    assert response.json()["value"]["type"] == "AVRO"
    base_uri = create_consumer(http, url, f"v3avro-{uuid.uuid4().hex[:6]}", "avro")
    http.post(f"{base_uri}/subscription", headers={"Content-Type": V2}, json={"topics": [topic]})
    assert [r["value"] for r in fetch(http, base_uri, AVRO, 1)] == ["hello"]


def test_protobuf_through_the_fast_lane_and_another_process(
        servers: list[str], http: httpx.Client, new_topic: Callable[..., str]) -> None:
    """Once its schema is known, a Protobuf produce runs on the event loop (the fast lane);
    a value that does not match is still 42203 with nothing written."""
    url, topic = servers[0], new_topic()
    schema = 'syntax = "proto3"; package mill; message Gate { int64 id = 1; bool open = 2; }'
    first = http.post(f"{url}/topics/{topic}", headers={"Content-Type": PROTOBUF},
                      json={"value_schema": schema, "records": [{"value": {"id": 1}}]})
    assert first.status_code == 200, first.text
    schema_id = first.json()["value_schema_id"]
    for body in ({"value_schema": schema, "records": [{"value": {"id": "2", "open": True}}]},
                 {"value_schema_id": schema_id, "records": [{"value": {"id": 3}}]}):
        response = http.post(f"{url}/topics/{topic}", headers={"Content-Type": PROTOBUF},
                             json=body)
        assert response.status_code == 200, response.text
    cluster_id = http.get(f"{url}/v3/clusters").json()["data"][0]["cluster_id"]
    records_url = f"{url}/v3/clusters/{cluster_id}/topics/{topic}/records"
    v3 = http.post(records_url, json={"value": {"type": "PROTOBUF", "schema_id": schema_id,
                                                "data": {"id": 4}}})
    assert v3.status_code == 200 and v3.json()["value"]["type"] == "PROTOBUF", v3.text
    bad = http.post(records_url, json={"value": {"type": "PROTOBUF", "schema_id": schema_id,
                                                 "data": {"gate": 5}}})
    assert bad.status_code == 422 and bad.json()["error_code"] == 42203, bad.text
    base_uri = create_consumer(http, url, f"proto-{uuid.uuid4().hex[:6]}", "protobuf")
    elsewhere = base_uri.replace(url, servers[1])
    http.post(f"{elsewhere}/subscription", headers={"Content-Type": V2},
              json={"topics": [topic]})
    records = fetch(http, elsewhere, PROTOBUF, 4)
    assert [r["value"] for r in records] == [
        {"id": "1", "open": False}, {"id": "2", "open": True}, {"id": "3", "open": False},
        {"id": "4", "open": False}]
    http.delete(base_uri)


def test_an_instance_answers_through_any_process(
        servers: list[str], http: httpx.Client, new_topic: Callable[..., str]) -> None:
    first, second = servers[:2]
    topic = new_topic()
    http.post(f"{first}/topics/{topic}", headers={"Content-Type": JSON},
              json={"records": [{"value": i} for i in range(3)]})
    base_uri = create_consumer(http, first, f"fwd-{uuid.uuid4().hex[:6]}", "json")
    elsewhere = base_uri.replace(first, second)
    assert http.post(f"{elsewhere}/subscription", headers={"Content-Type": V2},
                     json={"topics": [topic]}).status_code == 204
    assert [r["value"] for r in fetch(http, elsewhere, JSON, 3)] == [0, 1, 2]
    assert http.delete(elsewhere).status_code == 204
    gone = http.get(f"{base_uri}/subscription")
    assert (gone.status_code, gone.json()["error_code"]) == (404, 40403)


def test_a_long_poll_does_not_block_other_requests(
        servers: list[str], http: httpx.Client, new_topic: Callable[..., str]) -> None:
    url, topic = servers[0], new_topic()
    base_uri = create_consumer(http, url, f"poll-{uuid.uuid4().hex[:6]}", "binary")
    http.post(f"{base_uri}/subscription", headers={"Content-Type": V2}, json={"topics": [topic]})
    fetch(http, base_uri, BINARY, 0)
    done: list[float] = []

    def long_poll() -> None:
        with httpx.Client(timeout=30) as other:
            other.get(f"{base_uri}/records", params={"timeout": 3000},
                      headers={"Accept": BINARY})
            done.append(time.monotonic())

    poller = threading.Thread(target=long_poll)
    poller.start()
    time.sleep(0.3)
    started = time.monotonic()
    assert http.get(f"{url}/topics").status_code == 200
    assert time.monotonic() - started < 1.5
    poller.join()
    http.delete(base_uri)


def test_chunked_streaming_produce(servers: list[str], http: httpx.Client,
                                   new_topic: Callable[..., str]) -> None:
    url, topic = servers[1], new_topic()
    cluster_id = http.get(f"{url}/v3/clusters").json()["data"][0]["cluster_id"]

    def body() -> Iterator[bytes]:
        for i in range(500):
            data = base64.b64encode(b"%d" % i).decode()
            yield json.dumps({"value": {"type": "BINARY", "data": data}}).encode()

    with http.stream("POST", f"{url}/v3/clusters/{cluster_id}/topics/{topic}/records",
                     content=body(), headers={"Content-Type": "application/json"}) as response:
        assert response.status_code == 200
        reports = [json.loads(line) for line in response.iter_lines() if line]
    assert [r["offset"] for r in reports] == list(range(500))


def test_a_slow_stream_gets_each_report_before_its_body_ends(
        servers: list[str], new_topic: Callable[..., str]) -> None:
    """Confluent's streaming mode: a record's report comes back while the client is still
    sending the body, a record split between chunks is one record, and a bad one gets its
    error in place without ending the stream."""
    url, topic = servers[0], new_topic()
    cluster_id = httpx.get(f"{url}/v3/clusters").json()["data"][0]["cluster_id"]
    host, port = url.removeprefix("http://").split(":")
    record = [json.dumps({"value": {"type": "STRING", "data": f"r{i}"}}).encode()
              for i in range(3)]
    with socket.create_connection((host, int(port)), timeout=15) as sock:
        http = h11.Connection(h11.CLIENT)
        reports = HttpReports(sock, http)
        sock.sendall(http.send(h11.Request(
            method="POST", target=f"/v3/clusters/{cluster_id}/topics/{topic}/records",
            headers=[("Host", host), ("Content-Type", "application/json"),
                     ("Transfer-Encoding", "chunked")])))
        sock.sendall(http.send(h11.Data(data=record[0])))
        assert reports.next(1) == [(200, 0)]
        sock.sendall(http.send(h11.Data(data=record[1][:9])))
        sock.sendall(http.send(h11.Data(data=record[1][9:] + b'\n{"value": {"type": "NO"}}')))
        assert reports.next(2) == [(200, 1), (400, None)]
        sock.sendall(http.send(h11.Data(data=record[2])))
        assert reports.next(1) == [(200, 2)]
        sock.sendall(http.send(h11.EndOfMessage()))
        assert reports.next(0, until_end=True) == []
        assert reports.status == 200


class HttpReports:
    """The report lines of a streaming produce's response, read as they come."""

    def __init__(self, sock: socket.socket, http: h11.Connection) -> None:
        self.sock, self.http = sock, http
        self.status: int | None = None
        self.buffer = b""

    def next(self, count: int, until_end: bool = False) -> list[tuple[int, int | None]]:
        lines: list[bytes] = []
        while len(lines) < count or until_end:
            event = self.http.next_event()
            if event is h11.NEED_DATA:
                self.http.receive_data(self.sock.recv(65536))
            elif isinstance(event, h11.Response):
                self.status = event.status_code
            elif isinstance(event, h11.Data):
                self.buffer += bytes(event.data)
                *complete, self.buffer = self.buffer.split(b"\n")
                lines += complete
            elif isinstance(event, h11.EndOfMessage):
                break
        reports = [json.loads(line) for line in lines]
        return [(r["error_code"], r.get("offset")) for r in reports]


def test_a_stream_delivers_records_produced_after_it_opened_through_any_process(
        servers: list[str], http: httpx.Client, new_topic: Callable[..., str]) -> None:
    first, second = servers[:2]
    topic = new_topic()
    base_uri = create_consumer(http, first, f"stream-{uuid.uuid4().hex[:6]}", "json")
    http.post(f"{base_uri}/subscription", headers={"Content-Type": V2}, json={"topics": [topic]})
    elsewhere = base_uri.replace(first, second)
    received: list[dict[str, Any]] = []
    with http.stream("GET", f"{elsewhere}/records/stream", params={"timeout": 15000},
                     headers={"Accept": "application/x-ndjson"}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/x-ndjson"
        http.post(f"{first}/topics/{topic}", headers={"Content-Type": JSON},
                  json={"records": [{"value": i} for i in range(3)]})
        for line in response.iter_lines():
            received.append(json.loads(line))
            if len(received) == 3:
                break
    # Leaving the stream stopped it: later records wait for the next reader. The owner
    # hears of the disconnect asynchronously, through the other process.
    time.sleep(1)
    http.post(f"{first}/topics/{topic}", headers={"Content-Type": JSON},
              json={"records": [{"value": i} for i in range(3, 5)]})
    rest = fetch(http, base_uri, JSON, 2)
    assert [(r["offset"], r["value"]) for r in received] == [(0, 0), (1, 1), (2, 2)]
    assert [(r["offset"], r["value"]) for r in rest] == [(3, 3), (4, 4)]
    missing = http.get(f"{second}/consumers/nobody/instances/none/records/stream")
    assert (missing.status_code, missing.json()["error_code"]) == (404, 40403)
    assert http.delete(base_uri).status_code == 204


def test_the_fast_lane_relays_a_fetch_to_the_owner_itself(
        servers: list[str], http: httpx.Client, new_topic: Callable[..., str],
        settings: Any) -> None:
    """This process (the in-process lane and Django handler of test_lane) does not hold the
    instance; a live server does. Both paths relay the fetch to it, and the lane does so
    without Django's handler once the owner is in the owner cache."""
    from restproxy.instances.manager import manager
    from tests.restproxy.test_lane import both

    owner, topic = servers[0], new_topic()
    group = f"lane-fwd-{uuid.uuid4().hex[:6]}"
    base_uri = create_consumer(http, owner, group, "binary")
    assert http.post(f"{base_uri}/subscription", headers={"Content-Type": V2},
                     json={"topics": [topic]}).status_code == 204
    owner_root, instance_path = base_uri.split("/consumers/", 1)
    settings.RESTPROXY_INTERNAL_URL = "http://127.0.0.1:9/not-the-owner"
    owners = manager()._owners
    owners.put((group, instance_path.rsplit("/", 1)[1]), owner_root, owners.generation())
    try:
        got, by_django = both("GET", f"/consumers/{instance_path}/records?timeout=100",
                              accept=BINARY)
        assert (got.status_code, got.json(), by_django) == (200, [], 1)
        # The query goes along: a bad one is the owner's 422 on both paths.
        bad, by_django = both("GET", f"/consumers/{instance_path}/records?timeout=x",
                              accept=BINARY)
        assert bad.status_code == 422 and by_django == 1
        mismatch, by_django = both("GET", f"/consumers/{instance_path}/records", accept=JSON)
        assert mismatch.json()["error_code"] == 40601 and by_django == 1  # the owner said so
    finally:
        assert http.delete(base_uri).status_code == 204
