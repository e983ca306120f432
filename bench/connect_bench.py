"""Kafka Connect's file connectors against a plain confluent-kafka loop on the same data.

Starts a built-in broker and one Connect worker process, writes N lines to a file, then:
- source: FileStreamSource, the lines appended at once to the file its running task
  watches, from the first record in the topic until the topic holds them all; against a
  confluent-kafka producer loop that reads the same file and produces each line
  (linger.ms=5, acks=all, idempotent as the worker's), until flushed;
- sink: FileStreamSink, resumed when its paused consumer is assigned, from the first line in
  the sink file until it holds every line; against a confluent-kafka consumer loop that
  writes each record's value as a line to a file, from its first record to its last.
Both sides are timed from their first record, so Connect's control-plane delays (a task's
poll interval, the resume going through the config topic) are not counted as throughput.
Ratios are Connect / plain loop (records/s), the goal >= 0.7. Each side's CPU per record
is printed too (the worker process's and the plain loop's whole process, from before the
first record to the last): on a loaded machine the rates follow the CPU share each process
gets, the CPU per record much less. `--tree DIR` runs the worker from another source tree
(e.g. a `git archive` of an older commit), to compare trees run by run.

    .venv/bin/python bench/connect_bench.py [--lines 300000] [--eos] [--tree DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.brokerproc import BrokerProcess
from tests.connect.workers import WorkerProcess, wait_for

LINE = "x" * 90
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """A process's user and system CPU so far, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def topic_size(admin: Consumer, topic: str) -> int:
    parts = admin.list_topics(topic, timeout=10).topics[topic].partitions
    return sum(admin.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
               for p in parts)


def task_state(worker: WorkerProcess, name: str) -> str | None:
    status = worker.get(f"/connectors/{name}/status")
    tasks = status.json().get("tasks", []) if status.status_code == 200 else []
    return str(tasks[0]["state"]) if tasks else None


def plain_produce(bootstrap: str, path: Path, topic: str) -> tuple[float, float]:
    cpu = time.process_time()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                         "enable.idempotence": True})
    started = time.perf_counter()
    count = 0
    with open(path, "rb") as lines:
        for line in lines:
            while True:
                try:
                    producer.produce(topic, line.rstrip(b"\n"))
                    break
                except BufferError:
                    producer.poll(0.01)
            count += 1
    producer.flush(120)
    return count / (time.perf_counter() - started), time.process_time() - cpu


def plain_consume(bootstrap: str, topic: str, out: Path, count: int) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"plain-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    while not consumer.assignment():
        consumer.consume(1, 0.1)
    started = 0.0
    seen = 0
    with open(out, "w") as sink:
        while seen < count:
            for msg in consumer.consume(1000, 0.5):
                if msg.error() is None:
                    started = started or time.perf_counter()
                    sink.write(msg.value().decode() + "\n")
                    seen += 1
        sink.flush()
    rate = seen / (time.perf_counter() - started)
    consumer.close()
    return rate


def connect_source(worker: WorkerProcess, probe: Consumer, data: Path, watched: Path,
                   topic: str, count: int) -> tuple[float, float]:
    watched.write_text("")
    answer = worker.request("POST", "/connectors", {"name": f"src-{topic}", "config": {
        "connector.class": "FileStreamSource", "file": str(watched), "topic": topic}})
    assert answer.status_code == 201, answer.text
    wait_for(lambda: task_state(worker, f"src-{topic}") == "RUNNING", 60)
    time.sleep(1)  # the task has opened the file and waits for lines
    assert worker.proc is not None
    cpu = cpu_seconds(worker.proc.pid)
    with open(watched, "ab") as out:
        out.write(data.read_bytes())
    while topic_size(probe, topic) == 0:
        time.sleep(0.005)
    started = time.perf_counter()
    while topic_size(probe, topic) < count:
        time.sleep(0.02)
    return count / (time.perf_counter() - started), cpu_seconds(worker.proc.pid) - cpu


def connect_sink(worker: WorkerProcess, topic: str, out: Path, count: int) -> float:
    name = f"sink-{topic}"
    answer = worker.request("POST", "/connectors", {"name": name, "initial_state": "PAUSED",
                                                    "config": {
        "connector.class": "FileStreamSink", "file": str(out), "topics": topic}})
    assert answer.status_code == 201, answer.text
    wait_for(lambda: task_state(worker, name) == "PAUSED", 60)
    time.sleep(3)  # the consumer joins its group and is assigned while paused
    worker.request("PUT", f"/connectors/{name}/resume")
    while not out.exists() or out.stat().st_size == 0:
        time.sleep(0.005)
    started = time.perf_counter()
    while out.stat().st_size < count * (len(LINE) + 1):
        time.sleep(0.02)
    return count / (time.perf_counter() - started)


def one_round(broker: BrokerProcess, worker: WorkerProcess, root: Path, data: Path,
              lines: int) -> tuple[tuple[float, float], tuple[float, float], float, float]:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topics = [f"bench-{i}-{uuid.uuid4().hex[:6]}" for i in range(2)]
    for future in admin.create_topics([NewTopic(t, 1, 1) for t in topics]).values():
        future.result(15)
    probe = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "probe"})
    plain_in = plain_produce(broker.bootstrap, data, topics[0])
    connect_in = connect_source(worker, probe, data, root / f"{topics[1]}.txt", topics[1],
                                lines)
    plain_out = plain_consume(broker.bootstrap, topics[0], root / "plain.out", lines)
    connect_out = connect_sink(worker, topics[0], root / f"{topics[0]}.out", lines)
    probe.close()
    return plain_in, connect_in, plain_out, connect_out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--eos", action="store_true", help="exactly.once.source.support")
    parser.add_argument("--tree", type=Path, default=None,
                        help="run the worker from this source tree (default: this one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        broker = BrokerProcess(root / "broker").start()
        # Kafka's defaults for the offset flush and the group session, as a deployed worker
        # runs (the tests' shorter session lets a loaded machine's stall cost a rebalance)
        extra = {"offset.flush.interval.ms": "60000", "session.timeout.ms": "10000",
                 "heartbeat.interval.ms": "3000"}
        if args.eos:
            extra["exactly.once.source.support"] = "enabled"
        worker = WorkerProcess(root, broker.bootstrap, "bench", extra,
                               **({"tree": args.tree} if args.tree else {})).start()
        data = root / "lines.txt"
        data.write_text("".join(f"{LINE}\n" for _ in range(args.lines)))
        mode = "exactly-once source" if args.eos else "at-least-once source"
        print(f"{args.lines:,} lines of {len(LINE) + 1} bytes, one partition, {mode}, "
              f"worker from {worker.tree}")
        ratios: list[tuple[float, float]] = []
        try:
            for n in range(args.rounds):
                (plain_in, plain_cpu), (connect_in, connect_cpu), plain_out, connect_out = (
                    one_round(broker, worker, root, data, args.lines))
                ratios.append((connect_in / plain_in, connect_out / plain_out))
                print(f"round {n + 1}: file -> topic: connect {connect_in:>9,.0f} rec/s, "
                      f"plain producer {plain_in:>9,.0f} rec/s ({ratios[-1][0]:.2f}), CPU "
                      f"{connect_cpu / args.lines * 1e6:.1f} vs "
                      f"{plain_cpu / args.lines * 1e6:.1f} µs/record; "
                      f"topic -> file: connect {connect_out:>9,.0f} rec/s, plain consumer "
                      f"{plain_out:>9,.0f} rec/s ({ratios[-1][1]:.2f})")
        finally:
            worker.stop()
            broker.stop()
        print(f"median ratio: file -> topic {statistics.median(r[0] for r in ratios):.2f}, "
              f"topic -> file {statistics.median(r[1] for r in ratios):.2f}")


if __name__ == "__main__":
    main()
