"""Shared pieces of the consumer-group conformance tests (tests/compat/test_groups_*.py).

Each client's members poll on their own thread (kafka-python's consumer is not
thread-safe, and a member blocked in a rebalance must not stall the others), and the test
watches their assignments until every partition has exactly one owner. A "victim" member
runs in a child process so that SIGKILL can silence it without a LeaveGroup.
"""

from __future__ import annotations

import asyncio
import selectors
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

from tests.brokerproc import REPO, die_with_test_run
from tests.compat.clients import Message, confluent_produce

PARTITIONS = 6
SESSION_MS = 3000
HEARTBEAT_MS = 300
# Short sessions need a lower broker minimum than Kafka's 6 s default.
BROKER_OVERRIDES = {"group.min.session.timeout.ms": "1000"}
TIMEOUT = 30.0

Record = tuple[int, int, bytes]  # partition, offset, value


def create_topic(bootstrap: str, prefix: str) -> str:
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    [future] = admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values()
    future.result(15)
    return topic


def produce(bootstrap: str, topic: str, per_partition: int, tag: str) -> set[bytes]:
    """per_partition messages to every partition; returns their values."""
    messages = [Message(None, f"{tag}-{p}-{i}".encode(), partition=p)
                for p in range(PARTITIONS) for i in range(per_partition)]
    confluent_produce(bootstrap, topic, messages)
    return {m.value for m in messages if m.value is not None}


def partitioned(assignments: Sequence[set[int]], members: int) -> bool:
    """Every partition owned by exactly one of `members` members, and each owns some."""
    if len(assignments) != members or not all(assignments):
        return False
    owned = [p for a in assignments for p in a]
    return len(owned) == len(set(owned)) == PARTITIONS


def wait_until(condition: Callable[[], bool], what: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


async def async_wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if condition():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out after {TIMEOUT}s waiting for {what}")


@dataclass
class PollingMember:
    """A synchronous consumer polled on its own thread; records what it got and owns."""

    poll: Callable[[], list[Record]]
    owned: Callable[[], set[int]]
    consumed: list[Record] = field(default_factory=list)
    assignment: set[int] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    error: BaseException | None = None

    def start(self) -> PollingMember:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.consumed += self.poll()
                self.assignment = self.owned()
        except BaseException as exc:  # noqa: BLE001 - the thread's end: stop() re-raises it
            self.error = exc

    def stop(self) -> None:
        """Stop polling; the consumer may then be used from the calling thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(TIMEOUT)
        if self.error is not None:
            raise self.error


def values(records: list[Record]) -> list[bytes]:
    return [value for _, _, value in records]


# -- a member that can be silenced with SIGKILL ----------------------------------------------
VICTIM_READY = "victim assigned"


VICTIM_READY_S = 60.0


def start_assigned_victim(client: str, bootstrap: str, topic: str,
                          group: str) -> subprocess.Popen[str]:
    """A victim member in a process of its own (dying with the test run), returned once it
    owns partitions. One that does not get there in VICTIM_READY_S is killed and started
    once more: kafka-python 3.0.12's consumer was seen (py-spy, at load 12) spinning in
    ensure_coordinator_ready after its first rebalance, at 80% of a core, never heartbeating
    again, and it outlived the run; the test is about the broker evicting a member, which
    the second victim still shows."""
    for _ in range(2):
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.compat.groups", client, bootstrap, topic, group],
            cwd=REPO, stdout=subprocess.PIPE, text=True, preexec_fn=die_with_test_run,
        )
        assert proc.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            if selector.select(VICTIM_READY_S):  # the victim prints once it owns partitions
                line = proc.stdout.readline()
                assert VICTIM_READY in line, f"victim exited: {line!r}"
                return proc
        proc.kill()
        proc.wait()
    raise AssertionError(f"no {client} victim owned partitions in {VICTIM_READY_S:.0f}s, twice")


def _victim_confluent(bootstrap: str, topic: str, group: str) -> None:
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": SESSION_MS,
        "heartbeat.interval.ms": HEARTBEAT_MS, "auto.offset.reset": "earliest",
    })
    consumer.subscribe([topic])
    announced = False
    while True:
        consumer.poll(0.2)
        if consumer.assignment() and not announced:
            print(VICTIM_READY, flush=True)
            announced = True


def _victim_kafka_python(bootstrap: str, topic: str, group: str) -> None:
    import kafka

    consumer = kafka.KafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=group, session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=HEARTBEAT_MS, auto_offset_reset="earliest",
    )
    announced = False
    while True:
        consumer.poll(200)
        if consumer.assignment() and not announced:
            print(VICTIM_READY, flush=True)
            announced = True


async def _victim_aiokafka(bootstrap: str, topic: str, group: str) -> None:
    import aiokafka

    consumer = aiokafka.AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=group, session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=HEARTBEAT_MS, auto_offset_reset="earliest",
    )
    await consumer.start()
    announced = False
    while True:
        await consumer.getmany(timeout_ms=200)
        if consumer.assignment() and not announced:
            print(VICTIM_READY, flush=True)
            announced = True


if __name__ == "__main__":
    client, bootstrap_arg, topic_arg, group_arg = sys.argv[1:5]
    if client == "aiokafka":
        asyncio.run(_victim_aiokafka(bootstrap_arg, topic_arg, group_arg))
    elif client == "kafka-python":
        _victim_kafka_python(bootstrap_arg, topic_arg, group_arg)
    else:
        _victim_confluent(bootstrap_arg, topic_arg, group_arg)
