"""The platform's web server: several uvicorn workers on several ports, websockets
included, and REST proxy consumer instances reachable whichever worker a request hits."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass

import httpx
import pytest
import websockets

from brokercluster.ports import free_port
from clusterclient import ClusterClient
from tests.brokerproc import REPO

V2 = "application/vnd.kafka.v2+json"


@dataclass
class Server:
    web: str
    registry: str
    proxy: str


@pytest.fixture(scope="module")
def server(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """`python -m millrace.webserver` with two workers, as `manage.py platform` runs it."""
    data_dir = tmp_path_factory.mktemp("webserver")
    web, registry, proxy = free_port(), free_port(), free_port()
    env = {**os.environ, "MILLRACE_DATA_DIR": str(data_dir),
           "DATABASE_URL": f"sqlite:///{data_dir / 'db.sqlite3'}",
           "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, "MILLRACE_LOG_LEVEL": "WARNING",
           "MILLRACE_REGISTRY_PORT": str(registry), "MILLRACE_RESTPROXY_PORT": str(proxy),
           "SCHEMA_REGISTRY_URL": f"http://127.0.0.1:{registry}"}
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
                   cwd=REPO, env=env, check=True)
    binds = [arg for port in (web, registry, proxy) for arg in ("--bind", f"127.0.0.1:{port}")]
    proc = subprocess.Popen(
        [sys.executable, "-m", "millrace.webserver", "--app",
         "tests.controlcenter.ws_app:application", *binds, "--workers", "2",
         "--internal-path", "/kafka/"],
        cwd=REPO, env=env, start_new_session=True,
    )
    urls = Server(*(f"http://127.0.0.1:{port}" for port in (web, registry, proxy)))
    try:
        _wait_ready(f"{urls.web}/healthz", proc)
        yield urls
    finally:
        proc.terminate()
        proc.wait(30)


def _wait_ready(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the web server exited"
        with suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    raise AssertionError(f"{url} did not answer")


def test_it_serves_each_app_at_the_root_of_its_port_and_under_its_prefix(server: Server) -> None:
    assert httpx.get(f"{server.web}/healthz").text == "ok"
    for registry in (server.registry, f"{server.web}/schema-registry"):
        assert httpx.get(f"{registry}/schemas/types").json() == ["JSON", "PROTOBUF", "AVRO"]
        missing = httpx.get(f"{registry}/schemas/ids/987654")
        assert missing.status_code == 404
        assert missing.json() == {"error_code": 40403, "message": "Schema 987654 not found"}
    for proxy in (server.proxy, f"{server.web}/kafka"):
        assert httpx.get(f"{proxy}/topics", headers={"Accept": V2}).status_code == 200


def test_websockets_reach_channels_consumers_in_every_worker(server: Server) -> None:
    async def talk() -> set[str]:
        pids = set()
        for n in range(8):  # each connection lands on whichever worker accepts it
            async with websockets.connect(f"{server.web.replace('http', 'ws')}/ws/echo") as ws:
                await ws.send(f"hello {n}")
                pid, text = str(await ws.recv()).split(" ", 1)
                assert text == f"hello {n}"
                pids.add(pid)
        return pids

    assert asyncio.run(talk())


def test_a_consumer_instance_answers_through_any_worker(
    server: Server, kafka_bootstrap: str
) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    created = httpx.post(f"{server.proxy}/consumers/{group}", headers={"Content-Type": V2},
                         json={"format": "binary"})
    assert created.status_code == 200, created.text
    base = created.json()["base_uri"]
    assert base.startswith(server.proxy)
    # An existing topic: a subscription to a missing one is a 40401 on fetch, as designed.
    topic = f"t-{uuid.uuid4().hex[:8]}"
    ClusterClient(kafka_bootstrap).create_topic(topic, partitions=1, replication_factor=1)
    subscribed = httpx.post(f"{base}/subscription", headers={"Content-Type": V2},
                            json={"topics": [topic]})
    assert subscribed.status_code == 204
    for _ in range(12):  # new connections: both workers answer, one of them by forwarding
        with httpx.Client() as fresh:
            answer = fresh.get(f"{base}/subscription", headers={"Accept": V2})
        assert answer.status_code == 200
        assert answer.json() == {"topics": [topic]}
        records = httpx.get(f"{base}/records", params={"timeout": 10},
                            headers={"Accept": "application/vnd.kafka.binary.v2+json"})
        assert records.status_code == 200 and records.json() == []
    assert httpx.delete(base, headers={"Accept": V2}).status_code == 204
    gone = httpx.get(f"{base}/subscription", headers={"Accept": V2})
    assert gone.status_code == 404 and gone.json()["error_code"] == 40403
