"""The target cluster of a MirrorSourceConnector going down while it copies. As in Kafka,
the Connect worker's cluster is the target (cluster B, a broker process of this module that
is SIGKILLed and started again on its own port and log directory); cluster A, the source,
is the session broker and keeps taking records throughout. The worker runs exactly-once
sources, and a file source beside the mirror.

While B is away the mirror task fails (its transaction cannot commit within 30 s, or its
target does not answer a config sync within `admin.timeout.ms`) and says why in /status
once B is back and the status reaches its topic. The worker process lives through it, and its file
source, which had nothing to send meanwhile, never stops and sends what comes after.
After the task's restart every record of A is on B once,
in order per partition (read_committed: a transaction cut off by the kill is aborted)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.brokerproc import BrokerProcess
from tests.connect.workers import WorkerProcess, read_topic, wait_for

PARTITIONS = 3
ONE = {"replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
       "heartbeats.topic.replication.factor": "1"}


@pytest.fixture(scope="module")
def cluster_b(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("outage-b")).start()
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def worker(cluster_b: BrokerProcess, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[WorkerProcess]:
    proc = WorkerProcess(tmp_path_factory.mktemp("outage-worker"), cluster_b.bootstrap,
                         f"outage-{uuid.uuid4().hex[:6]}",
                         {"exactly.once.source.support": "enabled"}).start()
    yield proc
    proc.stop()


class SteadyProducer:
    """Produces `value-<n>` to A's topic, a few records every 50 ms, until stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "enable.idempotence": True})
        self.topic, self.sent = topic, 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stopping.is_set():
            for _ in range(6):
                self.producer.produce(self.topic, f"value-{self.sent}".encode(),
                                      partition=self.sent % PARTITIONS)
                self.sent += 1
            self.producer.poll(0)
            time.sleep(0.05)

    def stop(self) -> int:
        self.stopping.set()
        self.thread.join(10)
        assert self.producer.flush(30) == 0
        return self.sent


def _by_partition(bootstrap: str, topic: str, expected: int, timeout: float = 90
                  ) -> dict[int, list[bytes]]:
    """Every committed record of `topic`, per partition, once `expected` arrived."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "outage-reader",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    found: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    deadline, quiet = time.monotonic() + timeout, 0
    while time.monotonic() < deadline and (sum(map(len, found.values())) < expected
                                           or quiet < 4):
        batch = consumer.consume(1000, 0.5)
        quiet = 0 if batch else quiet + 1
        for msg in batch:
            if msg.error() is None:
                found[msg.partition()].append(msg.value())
    consumer.close()
    return found


def _tasks(worker: WorkerProcess, name: str) -> list[dict[str, Any]]:
    try:
        answer = worker.get(f"/connectors/{name}/status")
    except Exception:  # noqa: BLE001 - the worker is busy rejoining: not an answer yet
        return []
    return list(answer.json().get("tasks", [])) if answer.status_code == 200 else []


def _states(worker: WorkerProcess, name: str) -> list[str]:
    return [str(t["state"]) for t in _tasks(worker, name)]


@pytest.mark.faults
def test_a_target_that_goes_down_fails_the_task_and_a_restart_copies_the_rest_once(
        kafka_bootstrap: str, cluster_b: BrokerProcess, worker: WorkerProcess,
        tmp_path: Path) -> None:
    run = uuid.uuid4().hex[:6]
    topic, mirror, files = f"outage-{run}", f"mirror-{run}", f"files-{run}"
    lines = tmp_path / "lines.txt"
    lines.write_text("")
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(10)
    flow = {"source.cluster.alias": "A", "target.cluster.alias": "B",
            "source.cluster.bootstrap.servers": kafka_bootstrap,
            "target.cluster.bootstrap.servers": cluster_b.bootstrap, **ONE}
    for name, config in ((mirror, {"connector.class": "MirrorSourceConnector",
                                   "topics": topic, "admin.timeout.ms": "2000",
                                   "sync.topic.configs.interval.seconds": "1"}),
                         (files, {"connector.class": "FileStreamSource", "file": str(lines),
                                  "topic": f"lines-{run}"})):
        answer = worker.request("POST", "/connectors", {"name": name,
                                                        "config": {**flow, **config}})
        assert answer.status_code == 201, answer.text
    for name in (mirror, files):
        wait_for(lambda name=name: _states(worker, name) == ["RUNNING"],  # type: ignore[misc]
                 60, f"{name} never ran:\n{worker.log()}")

    producer = SteadyProducer(kafka_bootstrap, topic)
    producer.thread.start()
    remote = f"A.{topic}"
    wait_for(lambda: sum(map(len, _by_partition(cluster_b.bootstrap, remote, 60, 5).values()))
             >= 60, 60, "nothing was copied before the outage")
    cluster_b.kill()  # mid-run: records keep arriving on A
    # Longer than the 30 s a transaction's commit waits (the task blocks there, not in its
    # 2 s admin calls): a shorter outage the task rides through, and copies on unharmed.
    time.sleep(40)
    cluster_b.start()

    def failed() -> str | None:
        tasks = _tasks(worker, mirror)
        return tasks[0].get("trace") if tasks and tasks[0]["state"] == "FAILED" else None
    trace = wait_for(failed, 120, f"the mirror task never failed: {_tasks(worker, mirror)}")
    assert "target cluster B" in trace or "transaction" in trace.lower(), trace
    assert worker.proc is not None and worker.proc.poll() is None  # the worker lived
    assert worker.get("/").status_code == 200
    # The file source had nothing to send while B was away: it never stopped, and the
    # lines written now reach B through it.
    assert [t["state"] for t in _tasks(worker, files)] == ["RUNNING"]
    lines.write_text("".join(f"line-{i}\n" for i in range(5)))
    assert read_topic(cluster_b.bootstrap, f"lines-{run}", 5, 60) == [
        f"line-{i}".encode() for i in range(5)]

    answer = worker.request("POST", f"/connectors/{mirror}/tasks/0/restart")
    assert answer.status_code in (200, 202, 204), answer.text
    wait_for(lambda: [t["state"] for t in _tasks(worker, mirror)] == ["RUNNING"], 90,
             f"the restarted task never ran: {_tasks(worker, mirror)}")
    sent = producer.stop()

    upstream = _by_partition(kafka_bootstrap, topic, sent)
    assert sum(map(len, upstream.values())) == sent
    copied = _by_partition(cluster_b.bootstrap, remote, sent, timeout=120)
    for partition in range(PARTITIONS):  # nothing lost, nothing twice, in order
        assert copied[partition] == upstream[partition], (
            partition, len(copied[partition]), len(upstream[partition]))
