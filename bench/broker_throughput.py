"""Produce and consume throughput of the built-in broker, side by side with two references.

In one run, with the same librdkafka client and the same 1 KiB values:
  (a) our broker (`python -m brokercore`, one process, a fresh log dir),
  (b) librdkafka's built-in mock cluster (`test.mock.num.brokers`), a no-JVM reference,
  (c) the raw limit of this machine for the same bytes in the same runtime: an asyncio
      loopback socket pump writing them to a file (produce) and reading them back out of the
      file onto a socket (consume).
It prints MB/s and messages/s for each, and the ratios ours/mock and ours/raw. The machine is
noisy: compare ratios from one run, not absolute numbers across runs.

    .venv/bin/python bench/broker_throughput.py [--messages 100000] [--size 1024]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import logging
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import confluent_kafka

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.brokerproc import BrokerProcess


def produce(bootstrap: str, topic: str, count: int, value: bytes, acks: str,
            partitions: int = 1, **extra: object) -> float:
    """Seconds to produce and flush `count` messages, spread over the first `partitions`."""
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
        "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000, **extra,
    })
    producer.produce(topic, value=value, partition=0)  # topic metadata, connection warm-up
    producer.flush(30)
    start = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value=value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.001)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - start
    assert remaining == 0, f"{remaining} messages not delivered"
    return elapsed


def consume(bootstrap: str, topic: str, **extra: object) -> tuple[int, float]:
    """Messages read from the log start to the high watermark, and the seconds it took.

    The mock cluster keeps only the most recent part of a partition, so both brokers are
    read from their own log start.
    """
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"bench-{time.time_ns()}",
        "enable.auto.commit": False, "fetch.max.bytes": 52_428_800,
        "max.partition.fetch.bytes": 10_485_760, **extra,
    })
    low, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, 0), 10)
    count = high - low
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, low)])
    got = 0
    start = time.perf_counter()
    while got < count:
        batch = consumer.consume(min(10_000, count - got), timeout=5)
        if not batch:
            raise RuntimeError(f"consumer stalled at {got} of {count}")
        got += sum(1 for m in batch if m.error() is None)
    elapsed = time.perf_counter() - start
    consumer.close()
    return count, elapsed


def mock_cluster() -> tuple[str, confluent_kafka.Producer]:
    """Start librdkafka's mock cluster; returns its bootstrap address and the owning handle."""
    log_buffer = io.StringIO()
    logger = logging.getLogger("mock-cluster")
    logger.addHandler(logging.StreamHandler(log_buffer))
    logger.setLevel(logging.DEBUG)
    owner = confluent_kafka.Producer(
        {"test.mock.num.brokers": 1, "debug": "mock", "logger": logger})
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        owner.poll(0.1)
        found = re.search(r"bootstrap\.servers=(\S+)", log_buffer.getvalue())
        if found:
            logger.setLevel(logging.WARNING)
            return found.group(1), owner
    raise RuntimeError("mock cluster did not report its bootstrap servers")


async def raw_pump(total: bytes, path: Path) -> tuple[float, float]:
    """Seconds to push `total` over loopback into a file, and back out of it."""
    received = asyncio.Event()

    async def sink(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Blocking file I/O on the loop, as the broker's own log appends do.
        with open(path, "wb") as f:  # noqa: ASYNC230
            while chunk := await reader.read(1 << 20):
                f.write(chunk)
        received.set()
        writer.close()

    server = await asyncio.start_server(sink, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    start = time.perf_counter()
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    view = memoryview(total)
    for offset in range(0, len(view), 1 << 20):
        writer.write(view[offset:offset + (1 << 20)])
        await writer.drain()
    writer.close()
    await received.wait()
    produce_s = time.perf_counter() - start
    server.close()

    async def source(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with open(path, "rb") as f:  # noqa: ASYNC230
            while chunk := f.read(1 << 20):
                writer.write(chunk)
                await writer.drain()
        writer.close()

    server = await asyncio.start_server(source, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    start = time.perf_counter()
    reader, _ = await asyncio.open_connection("127.0.0.1", port)
    got = 0
    while chunk := await reader.read(1 << 20):
        got += len(chunk)
    consume_s = time.perf_counter() - start
    server.close()
    assert got == len(total)
    return produce_s, consume_s


def report(name: str, size: int, count: int, seconds: float) -> float:
    mb_s = count * size / seconds / 1e6
    print(f"  {name:<34} {mb_s:8.1f} MB/s {count / seconds:10.0f} msg/s  ({count} messages)")
    return mb_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    count, value = args.messages, os.urandom(args.size)

    with tempfile.TemporaryDirectory() as tmp:
        ours = BrokerProcess(Path(tmp) / "broker", {"log.flush.interval.messages":
                                                     "9223372036854775807"}).start()
        mock_bootstrap, mock_owner = mock_cluster()
        results: dict[str, float] = {}
        targets = {"millrace broker": ours.bootstrap, "librdkafka mock cluster": mock_bootstrap}
        print(f"{count} messages of {args.size} bytes, librdkafka "
              f"{confluent_kafka.libversion()[0]}, median of {args.rounds} interleaved rounds")
        try:
            for acks in ("1", "all"):
                print(f"produce, acks={acks}:")
                runs: dict[str, list[float]] = {name: [] for name in targets}
                for round_no in range(args.rounds):
                    for name, bootstrap in targets.items():
                        topic = f"bench-{acks}-{round_no}"
                        runs[name].append(produce(bootstrap, topic, count, value, acks))
                for name, key in zip(targets, ("ours", "mock"), strict=True):
                    results[f"{key}-p{acks}"] = report(name, args.size, count,
                                                       statistics.median(runs[name]))
            print("consume:")
            for name, key in zip(targets, ("ours", "mock"), strict=True):
                reads = [consume(targets[name], f"bench-1-{r}") for r in range(args.rounds)]
                results[f"{key}-c"] = report(name, args.size, reads[0][0],
                                             statistics.median(t for _, t in reads))
            pumps = [asyncio.run(raw_pump(value * count, Path(tmp) / "raw.bin"))
                     for _ in range(args.rounds)]
            print("raw limit (asyncio loopback socket <-> file, same bytes):")
            results["raw-p"] = report("produce direction", args.size, count,
                                      statistics.median(p for p, _ in pumps))
            results["raw-c"] = report("consume direction", args.size, count,
                                      statistics.median(c for _, c in pumps))
        finally:
            ours.stop()
            del mock_owner

    print("ratios (same run):")
    for acks in ("1", "all"):
        ours_p = results[f"ours-p{acks}"]
        print(f"  produce acks={acks}: ours/mock {ours_p / results[f'mock-p{acks}']:.2f}"
              f"   ours/raw {ours_p / results['raw-p']:.2f}")
    print(f"  consume:          ours/mock {results['ours-c'] / results['mock-c']:.2f}"
          f"   ours/raw {results['ours-c'] / results['raw-c']:.2f}")


if __name__ == "__main__":
    main()
