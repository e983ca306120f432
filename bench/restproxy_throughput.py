"""REST proxy throughput against confluent-kafka directly, in the same run.

Starts a built-in broker and one web server process serving the proxy at the root of its port,
then measures records/s for: direct produce; v2 produce in 100-record requests (binary and
json) from concurrent clients; v3 streaming produce (one chunked request per client);
direct consume; consume through a REST consumer instance. Ratios are proxy / direct.

    .venv/bin/python bench/restproxy_throughput.py [--records 50000] [--clients 4]
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.brokerproc import BrokerProcess
from tests.restproxy.live import proxy_servers

PAYLOAD = b"x" * 100
V2 = "application/vnd.kafka.v2+json"


def new_topic(admin: AdminClient, partitions: int = 4) -> str:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(15)
    return name


def direct_produce(bootstrap: str, topic: str, count: int) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    started = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, PAYLOAD)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(60)
    return count / (time.perf_counter() - started)


def in_parallel(clients: int, work: Callable[[int], None]) -> float:
    threads = [threading.Thread(target=work, args=(i,)) for i in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started


def v2_produce(url: str, topic: str, count: int, clients: int, fmt: str) -> float:
    value = base64.b64encode(PAYLOAD).decode() if fmt == "binary" else PAYLOAD.decode()
    body = json.dumps({"records": [{"value": value}] * 100}).encode()
    per_client = count // clients // 100
    headers = {"Content-Type": f"application/vnd.kafka.{fmt}.v2+json"}

    def work(_: int) -> None:
        with httpx.Client(timeout=60) as http:
            for _ in range(per_client):
                response = http.post(f"{url}/topics/{topic}", content=body, headers=headers)
                assert response.status_code == 200, response.text

    return per_client * clients * 100 / in_parallel(clients, work)


def v3_stream(url: str, topic: str, count: int, clients: int) -> float:
    cluster_id = httpx.get(f"{url}/v3/clusters").json()["data"][0]["cluster_id"]
    record = json.dumps({"value": {"type": "BINARY",
                                   "data": base64.b64encode(PAYLOAD).decode()}}).encode()
    per_client = count // clients

    def chunks() -> Iterator[bytes]:
        for _ in range(per_client // 1000):
            yield record * 1000

    def work(_: int) -> None:
        with httpx.Client(timeout=120) as http, http.stream(
            "POST", f"{url}/v3/clusters/{cluster_id}/topics/{topic}/records",
            content=chunks(), headers={"Content-Type": "application/json"},
        ) as response:
            lines = sum(1 for line in response.iter_lines() if line)
            assert lines == per_client // 1000 * 1000, lines

    return per_client // 1000 * 1000 * clients / in_parallel(clients, work)


def direct_consume(bootstrap: str, topic: str, count: int) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"d-{uuid.uuid4()}",
                        "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    seen, started = 0, None
    while seen < count:
        batch = consumer.consume(1000, 1.0)
        if batch and started is None:
            started = time.perf_counter()
        seen += sum(1 for m in batch if m.error() is None)
    consumer.close()
    return count / (time.perf_counter() - (started or 0))


def proxy_consume(url: str, topic: str, count: int) -> float:
    with httpx.Client(timeout=60) as http:
        created = http.post(f"{url}/consumers/bench-{uuid.uuid4().hex[:6]}",
                            headers={"Content-Type": V2},
                            json={"format": "binary", "auto.offset.reset": "earliest"}).json()
        base = created["base_uri"]
        http.post(f"{base}/subscription", headers={"Content-Type": V2}, json={"topics": [topic]})
        accept = {"Accept": "application/vnd.kafka.binary.v2+json"}
        seen, started = 0, None
        while seen < count:
            records = http.get(f"{base}/records", params={"timeout": 1000},
                               headers=accept).json()
            if records and started is None:
                started = time.perf_counter()
            seen += len(records)
        elapsed = time.perf_counter() - (started or 0)
        http.delete(base)
    return count / elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="restproxy-bench-"))
    broker = BrokerProcess(work / "broker").start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        with proxy_servers(broker.bootstrap, work, processes=1) as urls:
            run(broker.bootstrap, urls[0], admin, args.records, args.clients)
    finally:
        broker.stop()


def run(bootstrap: str, url: str, admin: AdminClient, count: int, clients: int) -> None:
    topic = new_topic(admin)
    direct = direct_produce(bootstrap, topic, count)
    binary = v2_produce(url, new_topic(admin), count, clients, "binary")
    as_json = v2_produce(url, new_topic(admin), count, clients, "json")
    streaming = v3_stream(url, new_topic(admin), count, clients)
    consumed_direct = direct_consume(bootstrap, topic, count)
    consumed_proxy = proxy_consume(url, topic, count)
    print(f"records of {len(PAYLOAD)} bytes, {count} per run, {clients} HTTP clients")
    print(f"{'path':34} {'records/s':>10} {'vs direct':>10}")
    for name, rate, base in [
        ("produce: confluent-kafka direct", direct, direct),
        ("produce: v2 binary, 100/request", binary, direct),
        ("produce: v2 json, 100/request", as_json, direct),
        ("produce: v3 streaming (chunked)", streaming, direct),
        ("consume: confluent-kafka direct", consumed_direct, consumed_direct),
        ("consume: v2 consumer instance", consumed_proxy, consumed_direct),
    ]:
        print(f"{name:34} {rate:>10,.0f} {rate / base:>10.2f}")


if __name__ == "__main__":
    main()
