"""Cluster events as the analytics read them: the real collector (`manage.py collect`, one
cycle a second, a process of its own as the platform runs it), watching a three-broker
cluster while a group rebalances and a broker stops and comes back, writes rebalance, leader
change, under-replicated/replicated and broker down/up records to `_millrace-cluster-events`;
each test reads them back from the topic with a plain consumer and checks them against what
the test did and what the cluster's metadata said before.

The collector is not run inside the test worker: librdkafka's admin client can abort its
process when a request to a dead broker times out with its operation
(confluentinc/librdkafka#4605), and that took a pytest worker down twice. The platform's
supervisor restarts a collector that dies, and a restarted one misses what changed while it
was down: the story is then told again on a new cluster (`CollectorAborted`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from django.db import connection

from laganalysis.records import CLUSTER_EVENTS_TOPIC, ClusterEvent, EventKind, decode_cluster_event
from tests.brokerproc import REPO, ClusterProcess

pytestmark = pytest.mark.django_db(transaction=True)
STOPPED = 2  # the broker the module stops and starts again


class Story:
    """What the module did, and the events the collector wrote meanwhile."""

    def __init__(self, cluster: ClusterProcess, topic: str, group: str) -> None:
        self.cluster, self.topic, self.group = cluster, topic, group
        self.led_by_stopped: set[int] = set()  # partitions broker 2 led before it stopped
        self.stopped_at = self.started_at = 0.0  # epoch seconds of the stop and the start
        self.events: list[ClusterEvent] = []

    def of(self, kind: EventKind) -> list[ClusterEvent]:
        return [e for e in self.events if e.kind is kind]


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory, django_db_setup: None,
          django_db_blocker: Any) -> Iterator[Story]:  # fmt: skip
    for attempt in range(1, 4):
        tag = uuid.uuid4().hex[:8]
        with ClusterProcess(tmp_path_factory.mktemp("events-cluster"), brokers=3) as cluster:
            story = Story(cluster, f"events-{tag}", f"events-group-{tag}")
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
            admin.create_topics([NewTopic(story.topic, 3, 3)])[story.topic].result(30)
            log_path = tmp_path_factory.mktemp("collector") / "collect.log"
            try:
                with django_db_blocker.unblock(), collector_process(cluster, log_path) as proc:
                    act(story, admin, proc)
            except CollectorAborted as exc:
                # A collector restarted by the platform misses what changed while it was
                # down, so the story is told again from the start, on a new cluster.
                print(f"attempt {attempt}: {exc}", flush=True)
                continue
            story.events = read_events(cluster.bootstrap)
            yield story
            return
    pytest.fail("the collector aborted in librdkafka in three attempts out of three")


class CollectorAborted(Exception):
    """The collector process died (librdkafka#4605's abort) before the story was told."""


@contextmanager
def collector_process(cluster: ClusterProcess, log_path: Path
                      ) -> Iterator[subprocess.Popen[bytes]]:  # fmt: skip
    """`manage.py collect` every second against `cluster`, on the test database, until the
    block ends."""
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{connection.settings_dict['NAME']}",
           "KAFKA_BOOTSTRAP_SERVERS": cluster.bootstrap,
           "MILLRACE_CLUSTER_DIR": str(cluster.data_dir), "MILLRACE_CLUSTERS": ""}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "collect", "--interval", "1", "--metrics-port", "0"],
            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while "millrace collector ready" not in log_path.read_text(errors="replace"):
            assert proc.poll() is None, log_path.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "the collector did not get ready"
            time.sleep(0.2)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.returncode not in (0, -signal.SIGTERM):
        raise CollectorAborted(f"the collector exited with {proc.returncode}: "
                               f"{log_path.read_text(errors='replace')[-600:]}")


def act(story: Story, admin: AdminClient, collector: subprocess.Popen[bytes]) -> None:
    """A consumer joins, then a second (a rebalance); broker 2 stops (down, its leaderships
    move, its replicas leave the ISRs) and starts again (up, the ISRs fill again). Each step
    waits until the collector has written what it saw."""
    first = member(story)
    try:
        until(story, collector, lambda: len(first.assignment()) == 3, first,
              what="the first member owns the 3 partitions")
        second = member(story)
        try:
            until(story, collector, lambda: bool(first.assignment()) and bool(second.assignment())
                  and rebalanced_to_two(story), first, second,
                  what="both members own partitions and the rebalance to two is written")
        finally:
            second.close()
        meta = admin.list_topics(story.topic, timeout=10).topics[story.topic].partitions
        story.led_by_stopped = {p for p, m in meta.items() if m.leader == STOPPED}
        story.stopped_at = time.time()
        story.cluster.stop(STOPPED)
        until(story, collector, lambda: isr_shrunk(admin, story.topic)
              and seen(story, EventKind.BROKER_DOWN)
              and len(partitions_seen(story, EventKind.UNDER_REPLICATED)) == 3, first,
              what="the ISRs shrunk, BROKER_DOWN and 3 UNDER_REPLICATED written")
        story.started_at = time.time()
        story.cluster.start(STOPPED)
        until(story, collector, lambda: isr_full(admin, story.topic)
              and seen(story, EventKind.BROKER_UP)
              and len(partitions_seen(story, EventKind.REPLICATED)) == 3, first,
              what="the ISRs full, BROKER_UP and 3 REPLICATED written")
    finally:
        first.close()


def member(story: Story) -> Consumer:
    consumer = Consumer({"bootstrap.servers": story.cluster.bootstrap, "group.id": story.group,
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    consumer.subscribe([story.topic])
    return consumer


def until(story: Story, collector: subprocess.Popen[bytes], done: Callable[[], bool],
          *consumers: Consumer, what: str, timeout: float = 120) -> None:  # fmt: skip
    """Poll the consumers (their group stays alive) until done; the collector must live."""
    deadline = time.monotonic() + timeout
    while not done():
        if collector.poll() is not None:
            return  # collector_process says why
        assert time.monotonic() < deadline, f"not in {timeout:.0f} s: {what}; events: " \
            f"{[(e.kind.name, e.group or e.topic, e.partition) for e in written(story)]}"
        started = time.monotonic()
        while time.monotonic() - started < 1.0:
            for consumer in consumers:
                consumer.poll(0.1)


def written(story: Story) -> list[ClusterEvent]:
    """The events so far; none while the collector has not created the topic yet."""
    try:
        return read_events(story.cluster.bootstrap)
    except KafkaException:
        return []


def seen(story: Story, kind: EventKind) -> bool:
    return any(e.kind is kind for e in written(story))


def partitions_seen(story: Story, kind: EventKind) -> set[int | None]:
    return {e.partition for e in written(story) if e.kind is kind and e.topic == story.topic}


def rebalanced_to_two(story: Story) -> bool:
    return any(e.kind is EventKind.REBALANCE and e.group == story.group
               and e.detail["to"].endswith("(2 members)") for e in written(story))


def isr_shrunk(admin: AdminClient, topic: str) -> bool:
    meta = admin.list_topics(topic, timeout=10).topics[topic].partitions
    return all(STOPPED not in m.isrs for m in meta.values())


def isr_full(admin: AdminClient, topic: str) -> bool:
    meta = admin.list_topics(topic, timeout=10).topics[topic].partitions
    return all(len(m.isrs) == 3 for m in meta.values())


def read_events(bootstrap: str) -> list[ClusterEvent]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4()}",
                         "enable.auto.commit": False})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(CLUSTER_EVENTS_TOPIC, 0), 10)
        consumer.assign([TopicPartition(CLUSTER_EVENTS_TOPIC, 0, low)])
        events, position, deadline = [], low, time.monotonic() + 30
        while position < high:
            assert time.monotonic() < deadline, "the events topic did not give its records"
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                events.append(decode_cluster_event(msg.value()))
                position = msg.offset() + 1
        return events
    finally:
        consumer.close()


def test_a_member_joining_is_a_rebalance_of_that_group(story: Story) -> None:
    mine = [e for e in story.of(EventKind.REBALANCE) if e.group == story.group]
    assert mine, story.events
    assert any(e.detail["to"].endswith("(2 members)") for e in mine), mine
    assert all(e.topic is None and e.broker is None for e in mine)


def test_a_stopped_broker_is_down_then_up_with_its_leaderships_moved(story: Story) -> None:
    down, up = story.of(EventKind.BROKER_DOWN), story.of(EventKind.BROKER_UP)
    assert [e.broker for e in down] == [STOPPED] and [e.broker for e in up] == [STOPPED]
    assert story.stopped_at * 1000 <= down[0].timestamp_ms <= up[0].timestamp_ms
    assert up[0].timestamp_ms >= story.started_at * 1000
    assert down[0].detail == {"from": "up", "to": "down"}
    moved = {e.partition for e in story.of(EventKind.LEADER_CHANGE)
             if e.topic == story.topic and e.detail["from"] == str(STOPPED)}
    assert story.led_by_stopped and moved == story.led_by_stopped


def test_every_partition_is_under_replicated_while_the_broker_is_down_then_replicated(
    story: Story,
) -> None:
    def partitions(kind: EventKind) -> dict[int | None, ClusterEvent]:
        return {e.partition: e for e in story.of(kind) if e.topic == story.topic}

    under, back = partitions(EventKind.UNDER_REPLICATED), partitions(EventKind.REPLICATED)
    assert set(under) == set(back) == {0, 1, 2}
    for p in range(3):
        assert str(STOPPED) not in under[p].detail["isr"].split(",")
        assert sorted(back[p].detail["isr"].split(",")) == ["1", "2", "3"]
        assert story.stopped_at * 1000 <= under[p].timestamp_ms < back[p].timestamp_ms


def test_the_events_read_back_are_in_time_order_and_of_every_kind(story: Story) -> None:
    times = [e.timestamp_ms for e in story.events]
    assert times == sorted(times)
    kinds = {e.kind for e in story.events}
    assert kinds >= {EventKind.REBALANCE, EventKind.LEADER_CHANGE, EventKind.BROKER_DOWN,
                     EventKind.BROKER_UP, EventKind.UNDER_REPLICATED, EventKind.REPLICATED}
