"""What security costs the built-in broker: throughput over SASL_SSL against PLAINTEXT, and
SCRAM logins per second, side by side in one run.

One broker process (`tests/securebroker.py`: PLAINTEXT, SASL_PLAINTEXT and SASL_SSL
listeners, a test CA) and the same librdkafka client and 1 KiB values throughout. First it
times SCRAM-SHA-256 and SCRAM-SHA-512 logins (connect, SaslHandshake, two SaslAuthenticate
rounds; 4096 iterations, the client's PBKDF2 included) one after another, over
SASL_PLAINTEXT and over SASL_SSL. Then, in interleaved rounds, it produces (acks=1) and
consumes a topic over each listener, and prints MB/s, the ratios to PLAINTEXT, and the CPU
seconds per 100 MB of the broker (from /proc) and of the client (this process, librdkafka's
threads): where the cost goes. The broker's CPU on produce is also given for its event-loop
thread alone (over TLS, large reads are decrypted on a second thread). SASL_PLAINTEXT
separates the cost of SASL (once per connection) from the cost of TLS (per byte).

With `--before DIR` (a `git archive` of an earlier commit) a second broker runs from that
tree, and every round measures both brokers in turn: before/after in one run. With
`--latency N`, each round also times N produce round trips one at a time (one record of
1 KiB, then of 512 KiB, acks=1, nothing else in flight) per listener and tree: p50 and p99.

    .venv/bin/python bench/security_bench.py [--messages 50000] [--rounds 3] [--logins 200]
        [--before DIR] [--listeners PLAINTEXT,SASL_SSL] [--logins 0: no login timing]
        [--latency 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import ssl
import statistics
import sys
import tempfile
import time
from pathlib import Path

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import contextlib

from bench.broker_throughput import consume, produce
from brokercore.config import BrokerConfig
from brokercore.frame_connection import FrameConnection
from brokercore.replication.connection import BrokerConnection
from brokercore.security.connection import ClientSecurity
from brokercore.security.listeners import SecurityProtocol
from brokercore.security.tls import client_context, server_context
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


def cpu_seconds(pid: int, thread: int | None = None) -> float:
    """A process's CPU seconds, or those of one of its threads (the main thread's id is the
    process's: the broker's event loop)."""
    stat = f"/proc/{pid}/task/{thread}/stat" if thread else f"/proc/{pid}/stat"
    fields = Path(stat).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_round(broker: SecuredBroker, listener: str, topic: str, count: int,
              value: bytes) -> dict[str, float]:
    pid = broker.process.proc.pid  # type: ignore[union-attr]
    extra = client_config(broker, listener)
    mb = count * len(value) / 1e6
    cpu, loop, mine = cpu_seconds(pid), cpu_seconds(pid, pid), own_cpu_seconds()
    produced = produce(broker.bootstrap(listener), topic, count, value, "1", 1, **extra)
    produce_cpu, produce_client = cpu_seconds(pid) - cpu, own_cpu_seconds() - mine
    produce_loop = cpu_seconds(pid, pid) - loop
    cpu, mine = cpu_seconds(pid), own_cpu_seconds()
    read, consumed = consume(broker.bootstrap(listener), topic, **extra)
    consume_cpu, consume_client = cpu_seconds(pid) - cpu, own_cpu_seconds() - mine
    read_mb = read * len(value) / 1e6
    return {"produce": mb / produced, "consume": read_mb / consumed,
            "produce_cpu": produce_cpu / mb * 100, "consume_cpu": consume_cpu / read_mb * 100,
            "produce_loop": produce_loop / mb * 100,
            "produce_client": produce_client / mb * 100,
            "consume_client": consume_client / read_mb * 100}


def own_cpu_seconds() -> float:
    """This process's CPU (librdkafka's threads included)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


LATENCY_SIZES = (1024, 512 * 1024)


def round_trips(broker: SecuredBroker, listener: str, topic: str, size: int,
                count: int) -> list[float]:
    """Seconds of each of `count` produce round trips, one record of `size` bytes at a time
    (acks=1, linger 0: produce, then wait for its delivery)."""
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap(listener),
                                         "acks": "1", "linger.ms": 0,
                                         **client_config(broker, listener)})
    value = os.urandom(size)
    producer.produce(topic, value=value, partition=0)  # metadata, connection warm-up
    producer.flush(30)
    times = []
    for _ in range(count):
        start = time.perf_counter()
        producer.produce(topic, value=value, partition=0)
        assert producer.flush(30) == 0
        times.append(time.perf_counter() - start)
    return times


def report_latency(latency: Latency) -> None:
    print("\nProduce round trips, one at a time (ms, all rounds): p50 / p99")
    for (tree, name, size), times in latency.items():
        times.sort()
        p50, p99 = times[len(times) // 2], times[int(len(times) * 0.99)]
        print(f"  [{tree}] {name:<15} {size:>7} B  {p50 * 1e3:7.2f} / {p99 * 1e3:7.2f}")


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


async def loopback_cpu(tls: bool, megabytes: int, frame: bytes,
                       ca: SecuredBroker) -> float:
    """CPU seconds this process spends moving `megabytes` through an asyncio server that
    reads them as the broker reads produce requests (size-prefixed frames into a
    `FrameConnection`), over a loopback socket, plain or TLS (the broker's own certificate
    and context builder)."""
    server_ctx = client_ctx = None
    if tls:
        config = BrokerConfig({"ssl.keystore.type": "PEM",
                               "ssl.keystore.location": ca.process.overrides[
                                   "ssl.keystore.location"]})
        server_ctx = server_context(config, "SSL")
        client_ctx = client_context(BrokerConfig({"ssl.truststore.type": "PEM",
                                                  "ssl.truststore.location": ca.ca_file}),
                                    "SSL")
    done = asyncio.get_running_loop().create_future()
    count = megabytes * 1_000_000 // len(frame)

    async def serve(connection: FrameConnection) -> None:
        if server_ctx is not None:
            await connection.start_tls(server_ctx, 10)
        for _ in range(count):
            await connection.read_frame()
        done.set_result(None)
        connection.close()

    tasks = []
    server = await asyncio.get_running_loop().create_server(
        lambda: FrameConnection(len(frame), lambda c: tasks.append(asyncio.create_task(serve(c))),
                                tls=tls), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_ctx,
                                              server_hostname="localhost" if tls else None)
    start = own_cpu_seconds()
    size = len(frame).to_bytes(4, "big")
    for _ in range(count):
        writer.write(size)
        writer.write(frame)
        await writer.drain()
    await done
    spent = own_cpu_seconds() - start
    writer.close()
    server.close()
    return spent


def decrypt_cpu(megabytes: int, frame: bytes, ca: SecuredBroker) -> float:
    """CPU seconds of OpenSSL alone encrypting and decrypting the same bytes (SSLObjects
    over memory BIOs, no sockets, no asyncio)."""
    server_ctx = server_context(BrokerConfig({
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": ca.process.overrides["ssl.keystore.location"]}), "SSL")
    client_ctx = client_context(BrokerConfig({"ssl.truststore.type": "PEM",
                                              "ssl.truststore.location": ca.ca_file}), "SSL")
    pipes = [ssl.MemoryBIO() for _ in range(4)]
    client = client_ctx.wrap_bio(pipes[0], pipes[1], server_hostname="localhost")
    server = server_ctx.wrap_bio(pipes[1], pipes[0], server_side=True)
    for _ in range(10):  # the handshake, turn by turn
        for side in (client, server):
            with contextlib.suppress(ssl.SSLWantReadError):
                side.do_handshake()
    start = own_cpu_seconds()
    for _ in range(megabytes * 1_000_000 // len(frame)):
        client.write(frame)
        while True:
            try:
                server.read(len(frame))
            except ssl.SSLWantReadError:
                break
    return own_cpu_seconds() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--logins", type=int, default=200)
    parser.add_argument("--listeners", default=",".join(LISTENERS))
    parser.add_argument("--before", type=Path, help="an older source tree, measured alongside")
    parser.add_argument("--no-loopback", action="store_true")
    parser.add_argument("--latency", type=int, default=0,
                        help="round trips per size, listener, tree and round")
    args = parser.parse_args()
    value = os.urandom(args.size)
    listeners = args.listeners.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        brokers: dict[str, SecuredBroker] = {}
        try:
            brokers["after"] = start_secured_broker(Path(tmp) / "after")
            if args.before:
                brokers["before"] = start_secured_broker(Path(tmp) / "before",
                                                         tree=args.before.resolve())
            topics = {name: f"bench-{name.lower()}" for name in listeners}
            for broker in brokers.values():
                admin = AdminClient({"bootstrap.servers": broker.bootstrap("PLAINTEXT")})
                for future in admin.create_topics(
                        [NewTopic(t, 1, 1) for t in topics.values()]).values():
                    future.result(30)
            if args.logins:
                time_logins(brokers["after"], args)
            results, latency = run_rounds(brokers, listeners, topics, value, args)
            print(f"load average at the end: {os.getloadavg()[0]:.1f}")
            for tree, by_listener in results.items():
                report(tree, by_listener, args)
            if "before" in results:
                compare(results, listeners)
            if latency:
                report_latency(dict(sorted(latency.items())))
            if not args.no_loopback:
                loopbacks(brokers["after"], args)
        finally:
            for broker in brokers.values():
                broker.process.stop()


Results = dict[str, dict[str, list[dict[str, float]]]]  # tree -> listener -> rounds
Latency = dict[tuple[str, str, int], list[float]]  # (tree, listener, size) -> seconds


def run_rounds(brokers: dict[str, SecuredBroker], listeners: list[str],
               topics: dict[str, str], value: bytes,
               args: argparse.Namespace) -> tuple[Results, Latency]:
    results: Results = {tree: {name: [] for name in listeners} for tree in brokers}
    latency: Latency = {}
    for r in range(args.rounds):
        # Each round starts with another listener (and tree), so none always follows
        # the others' writes (the page cache's writeback is paid by whoever writes next).
        trees = list(brokers)
        for tree in trees[r % len(trees):] + trees[:r % len(trees)]:
            for name in listeners[r % len(listeners):] + listeners[:r % len(listeners)]:
                results[tree][name].append(one_round(brokers[tree], name, topics[name],
                                                     args.messages, value))
                for size in LATENCY_SIZES if args.latency else ():
                    latency.setdefault((tree, name, size), []).extend(round_trips(
                        brokers[tree], name, topics[name], size, args.latency))
    return results, latency


def time_logins(broker: SecuredBroker, args: argparse.Namespace) -> None:
    print(f"SCRAM logins per second ({args.logins} one after another, connect and "
          "client PBKDF2 included, median of the rounds)")
    for listener in ("SASL_PLAINTEXT", "SASL_SSL"):
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            rate = statistics.median(
                asyncio.run(logins(broker, listener, mechanism, args.logins))
                for _ in range(args.rounds))
            print(f"  {listener:<15} {mechanism:<14} {rate:8.1f} /s")


def loopbacks(broker: SecuredBroker, args: argparse.Namespace) -> None:
    frame = os.urandom(2**20)
    plain = statistics.median(asyncio.run(loopback_cpu(False, 200, frame, broker))
                              for _ in range(args.rounds))
    tls = statistics.median(asyncio.run(loopback_cpu(True, 200, frame, broker))
                            for _ in range(args.rounds))
    cipher = statistics.median(decrypt_cpu(200, frame, broker) for _ in range(args.rounds))
    print("\nWhere TLS's cost goes: CPU seconds per 100 MB sent and read in 1 MiB "
          "frames in one asyncio process (both ends)")
    print(f"  asyncio loopback, plain      {plain / 2:6.3f}")
    print(f"  asyncio loopback, TLS        {tls / 2:6.3f}  (+{(tls - plain) / 2:.3f})")
    print(f"  of which OpenSSL's cipher    {cipher / 2:6.3f}  (SSLObject over memory "
          "BIOs: encrypt + decrypt)")


def medians(rounds: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}


def report(tree: str, results: dict[str, list[dict[str, float]]],
           args: argparse.Namespace) -> None:
    print(f"\n[{tree}] {args.messages} x {args.size} B, acks=1, {MECHANISM}, median of "
          f"{args.rounds} interleaved rounds; CPU seconds per 100 MB of the broker and of the "
          "client")
    print(f"{'listener':<15} {'produce MB/s':>12} {'msg/s':>8} {'ratio':>6} {'consume MB/s':>12} "
          f"{'msg/s':>8} {'ratio':>6} {'broker CPU: produce':>20} {'consume':>8} "
          f"{'client CPU: produce':>20} {'consume':>8} {'broker loop thread: produce':>28}")
    median = {name: medians(rounds) for name, rounds in results.items()}
    base = median.get("PLAINTEXT", next(iter(median.values())))
    per_msg = 1e6 / args.size
    for name, m in median.items():
        print(f"{name:<15} {m['produce']:12.1f} {m['produce'] * per_msg:8.0f} "
              f"{m['produce'] / base['produce']:6.2f} "
              f"{m['consume']:12.1f} {m['consume'] * per_msg:8.0f} "
              f"{m['consume'] / base['consume']:6.2f} "
              f"{m['produce_cpu']:20.2f} {m['consume_cpu']:8.2f} "
              f"{m['produce_client']:20.2f} {m['consume_client']:8.2f} "
              f"{m['produce_loop']:28.2f}")
    if "PLAINTEXT" in results:
        for name in results:
            if name != "PLAINTEXT":
                ratios = [
                    f"{mine['produce'] / plain['produce']:.2f}/"
                    f"{mine['consume'] / plain['consume']:.2f}"
                    for mine, plain in zip(results[name], results["PLAINTEXT"], strict=True)]
                print(f"  {name} / PLAINTEXT per round (produce/consume): {', '.join(ratios)}")
        for name, rounds in results.items():
            cpu = ", ".join(f"{r['produce_cpu']:.2f}/{r['produce_loop']:.2f}" for r in rounds)
            print(f"  {name} broker CPU s/100 MB per round, produce (all/loop thread): {cpu}")


def compare(results: dict[str, dict[str, list[dict[str, float]]]], listeners: list[str]) -> None:
    print("\nafter / before (medians): throughput produce, consume; broker CPU per 100 MB "
          "produce, consume")
    for name in listeners:
        after, before = medians(results["after"][name]), medians(results["before"][name])
        print(f"  {name:<15} {after['produce'] / before['produce']:6.2f} "
              f"{after['consume'] / before['consume']:6.2f}   "
              f"{after['produce_cpu'] / before['produce_cpu']:6.2f} "
              f"{after['consume_cpu'] / before['consume_cpu']:6.2f}")


if __name__ == "__main__":
    main()
