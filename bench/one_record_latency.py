"""Where the time of one produced record goes, as the REST proxy waits for it.

One record at a time (no concurrency, so this is latency, not throughput) through a
producer configured as `restproxy.client.KafkaGateway`'s (acks=all, a thread polling for
delivery reports every 50 ms at most) against a built-in cluster of three brokers
(replication factor 3, min.insync.replicas 2). For each record it times:

  report    produce() until its delivery callback runs on the polling thread
  resumed   produce() until the event loop awaiting it runs again (the callback's
            call_soon_threadsafe hop, which a v3 one-record request pays once)

with the proxy's `linger.ms` (2) and with 0 side by side, alternating in rounds, and prints
p50/p99 of each and the ratios.

    .venv/bin/python bench/one_record_latency.py [--records 500] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
PROXY_LINGER_MS = 2.0  # restproxy/client.py
WARMUP = 50


def free_base_port() -> int:
    """A base port whose Kafka, controller and metrics ports (base+i, +100, +200) are free."""
    for _ in range(100):
        base = random.randrange(20000, 40000)
        ports = [base + offset + i for offset in (0, 100, 200) for i in range(3)]
        try:
            for port in ports:
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError("no free ports")


def quantile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))] * 1000


async def measure(producer: Producer, topic: str, records: int) -> tuple[list[float], list[float]]:
    loop = asyncio.get_running_loop()
    reported: list[float] = []
    resumed: list[float] = []
    for _ in range(records + WARMUP):
        future: asyncio.Future[None] = loop.create_future()
        start = time.perf_counter()

        def delivered(err: KafkaError | None, msg: Message, future: asyncio.Future[None] = future,
                      start: float = start) -> None:
            assert err is None, err
            reported.append(time.perf_counter() - start)
            loop.call_soon_threadsafe(future.set_result, None)

        producer.produce(topic, b"x" * 100, on_delivery=delivered)
        await future
        resumed.append(time.perf_counter() - start)
    return reported[WARMUP:], resumed[WARMUP:]


def producer_for(bootstrap: str, linger_ms: float
                 ) -> tuple[Producer, threading.Event, threading.Thread]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": linger_ms, "acks": "all"})
    stop = threading.Event()

    def serve() -> None:  # as KafkaGateway._serve_callbacks while no loop drains
        while not stop.is_set():
            producer.poll(0.05)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return producer, stop, thread


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=500, help="per setting and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sys.setswitchinterval(0.0005)  # as a web worker (millrace/webserver.py)
    base = free_base_port()
    bootstrap = f"127.0.0.1:{base}"
    with tempfile.TemporaryDirectory() as data_dir:
        cluster = subprocess.Popen(
            [sys.executable, "-m", "brokercluster", "--data-dir", data_dir,
             "--base-port", str(base)], cwd=ROOT, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        try:
            run(bootstrap, args.records, args.rounds)
        finally:
            cluster.send_signal(signal.SIGINT)
            cluster.wait(30)


def run(bootstrap: str, records: int, rounds: int) -> None:
    # quiet while the cluster starts: a failed attempt raises, and is retried for two minutes
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
    deadline = time.monotonic() + 120
    while True:
        try:
            admin.create_topics([NewTopic("one-record", 1, 3, config={
                "min.insync.replicas": "2"})], request_timeout=10)["one-record"].result()
            break
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:  # a timed-out try made it
                break
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
    settings = {"proxy": PROXY_LINGER_MS, "linger 0": 0.0}
    samples: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in settings}
    for round_ in range(rounds):
        order = list(settings) if round_ % 2 == 0 else list(reversed(settings))
        for name in order:
            producer, stop, thread = producer_for(bootstrap, settings[name])
            reported, resumed = asyncio.run(measure(producer, "one-record", records))
            stop.set()
            thread.join()
            producer.flush(5)
            del producer  # closed before the cluster stops, so it logs no refused connects
            samples[name][0].extend(reported)
            samples[name][1].extend(resumed)
    print(f"{rounds} rounds of {records} records, one at a time; ms")
    print("| linger.ms | report p50 / p99 | resumed p50 / p99 | hop p50 (resumed - report) |")
    print("|---|---|---|---|")
    for name, linger in settings.items():
        reported, resumed = samples[name]
        print(f"| {linger:g} ({name})"
              f" | {quantile(reported, .5):.2f} / {quantile(reported, .99):.2f}"
              f" | {quantile(resumed, .5):.2f} / {quantile(resumed, .99):.2f}"
              f" | {quantile(resumed, .5) - quantile(reported, .5):.3f} |")
    proxy, zero = samples["proxy"][1], samples["linger 0"][1]
    print(f"resumed, linger 0 / proxy: p50 {quantile(zero, .5) / quantile(proxy, .5):.2f}, "
          f"p99 {quantile(zero, .99) / quantile(proxy, .99):.2f}")


if __name__ == "__main__":
    main()
