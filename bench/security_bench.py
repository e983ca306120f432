"""What security costs the built-in broker: throughput over SASL_SSL against PLAINTEXT, and
SCRAM logins per second, side by side in one run.

One broker process (`tests/securebroker.py`: PLAINTEXT, SASL_PLAINTEXT and SASL_SSL
listeners, a test CA) and the same librdkafka client and 1 KiB values throughout. In
interleaved rounds it produces (acks=1) and consumes a topic over each listener, and prints
MB/s, the broker's CPU seconds per 100 MB (from /proc: where the cost goes) and the ratios
to PLAINTEXT. SASL_PLAINTEXT separates the cost of SASL (paid once per connection) from
the cost of TLS (paid per byte). Then it times SCRAM-SHA-256 and SCRAM-SHA-512 logins
(connect, SaslHandshake, two SaslAuthenticate rounds; 4096 iterations, the client's
PBKDF2 included) one after another, over SASL_PLAINTEXT and over SASL_SSL.

    .venv/bin/python bench/security_bench.py [--messages 50000] [--rounds 3] [--logins 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.broker_throughput import consume, produce
from brokercore.config import BrokerConfig
from brokercore.replication.connection import BrokerConnection
from brokercore.security.connection import ClientSecurity
from brokercore.security.listeners import SecurityProtocol
from brokercore.security.tls import client_context
from tests.securebroker import CREDENTIALS, SecuredBroker, start_secured_broker

LISTENERS = ["PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL"]
MECHANISM = "SCRAM-SHA-512"


def client_config(broker: SecuredBroker, listener: str) -> dict[str, object]:
    config: dict[str, object] = {"security.protocol": listener}
    if listener != "PLAINTEXT":
        user, password = CREDENTIALS[MECHANISM]
        config.update({"sasl.mechanism": MECHANISM, "sasl.username": user,
                       "sasl.password": password, "ssl.ca.location": broker.ca_file})
    return config


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_round(broker: SecuredBroker, listener: str, topic: str, count: int,
              value: bytes) -> dict[str, float]:
    pid = broker.process.proc.pid  # type: ignore[union-attr]
    extra = client_config(broker, listener)
    mb = count * len(value) / 1e6
    cpu = cpu_seconds(pid)
    produced = produce(broker.bootstrap(listener), topic, count, value, "1", 1, **extra)
    produce_cpu = cpu_seconds(pid) - cpu
    cpu = cpu_seconds(pid)
    read, consumed = consume(broker.bootstrap(listener), topic, **extra)
    consume_cpu = cpu_seconds(pid) - cpu
    read_mb = read * len(value) / 1e6
    return {"produce": mb / produced, "consume": read_mb / consumed,
            "produce_cpu": produce_cpu / mb * 100, "consume_cpu": consume_cpu / read_mb * 100}


async def logins(broker: SecuredBroker, listener: str, mechanism: str, count: int) -> float:
    """Logins per second, one after another."""
    user, password = CREDENTIALS[mechanism]
    config = BrokerConfig({"ssl.truststore.location": broker.ca_file,
                           "ssl.truststore.type": "PEM"})
    protocol = SecurityProtocol(listener)
    context = client_context(config, listener) if protocol.tls else None
    security = ClientSecurity(protocol, context, mechanism, user, password)
    start = time.perf_counter()
    for _ in range(count):
        connection = await BrokerConnection.open("localhost", broker.ports[listener], "bench",
                                                 10.0, security)
        connection.close()
    return count / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--logins", type=int, default=200)
    args = parser.parse_args()
    value = os.urandom(args.size)
    with tempfile.TemporaryDirectory() as tmp:
        broker = start_secured_broker(Path(tmp))
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap("PLAINTEXT")})
            topics = {name: f"bench-{name.lower()}" for name in LISTENERS}
            for future in admin.create_topics(
                    [NewTopic(t, 1, 1) for t in topics.values()]).values():
                future.result(30)
            results: dict[str, list[dict[str, float]]] = {name: [] for name in LISTENERS}
            for _ in range(args.rounds):
                for name in LISTENERS:
                    results[name].append(one_round(broker, name, topics[name],
                                                   args.messages, value))
            report(results, args)
            print(f"\nSCRAM logins per second ({args.logins} one after another, "
                  "client PBKDF2 included)")
            for listener in ("SASL_PLAINTEXT", "SASL_SSL"):
                for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                    rate = asyncio.run(logins(broker, listener, mechanism, args.logins))
                    print(f"  {listener:<15} {mechanism:<14} {rate:8.1f} /s")
        finally:
            broker.process.stop()


def report(results: dict[str, list[dict[str, float]]], args: argparse.Namespace) -> None:
    print(f"{args.messages} x {args.size} B, acks=1, {MECHANISM}, median of {args.rounds} "
          "interleaved rounds")
    print(f"{'listener':<15} {'produce MB/s':>12} {'ratio':>6} {'consume MB/s':>12} "
          f"{'ratio':>6} {'broker CPU s/100MB produce':>27} {'consume':>8}")
    median = {name: {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
              for name, rounds in results.items()}
    base = median["PLAINTEXT"]
    for name, m in median.items():
        print(f"{name:<15} {m['produce']:12.1f} {m['produce'] / base['produce']:6.2f} "
              f"{m['consume']:12.1f} {m['consume'] / base['consume']:6.2f} "
              f"{m['produce_cpu']:27.2f} {m['consume_cpu']:8.2f}")


if __name__ == "__main__":
    main()
