"""Replication between two clusters as MirrorMaker 2 does it: cluster A (the session broker)
and cluster B (a broker of this module) with a Connect worker on B running the three mirror
connectors under Kafka's class names. A consumer group reads part of a topic on A, then
fails over to B, reads `A.<topic>` from the offsets the checkpoint connector translated and
committed there, and between the two clusters it has read every record, re-reading fewer
than `offset.lag.max` per partition (the records between the last offset sync and the
group's offset). Bad input: missing and clashing aliases are refused with Connect's 400,
an unreachable source fails the connector and an unreachable target fails the task, each
with the reason in /status, while the worker and its other connectors go on."""

from __future__ import annotations

import gc
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from django.test import Client
from pytest_django.fixtures import Settings as SettingsWrapper

from brokercluster.ports import free_port
from connect.connectors.mirror.formats import Checkpoint, Heartbeat, OffsetSync
from tests.brokerproc import BrokerProcess
from tests.connect.workers import WorkerProcess, wait_for

RECORDS = 300
LAG_MAX = 10  # offset.lag.max: a sync at least every 10 records of a partition
MIRROR = "org.apache.kafka.connect.mirror."


@pytest.fixture(scope="module")
def cluster_b(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("cluster-b")).start()
    yield broker
    # The replication page keeps a client per cluster per process: left cached, the ones
    # for this module's clusters would retry the stopped broker every second for the rest
    # of the pytest worker's session (CPU, and a log line each time).
    from controlcenter.pages import replication

    replication._clients.clear()
    gc.collect()  # librdkafka's handles go with their last reference
    broker.stop()


@pytest.fixture(scope="module")
def worker(cluster_b: BrokerProcess, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[WorkerProcess]:
    # The Connect cluster's Kafka is the target, as in Kafka; its converters are
    # StringConverter, so the mirror connectors' own ByteArrayConverter default is used.
    proc = WorkerProcess(tmp_path_factory.mktemp("connect-mirror"), cluster_b.bootstrap,
                         "connect-mirror").start()
    yield proc
    proc.stop()


def _flow(a: str, b: str, **extra: str) -> dict[str, str]:
    return {"source.cluster.alias": "A", "target.cluster.alias": "B",
            "source.cluster.bootstrap.servers": a, "target.cluster.bootstrap.servers": b,
            **extra}


def _create(worker: WorkerProcess, name: str, config: dict[str, str]) -> None:
    answer = worker.request("POST", "/connectors", {"name": name, "config": config})
    assert answer.status_code == 201, answer.text


def _state(worker: WorkerProcess, name: str) -> dict[str, Any]:
    return dict(worker.get(f"/connectors/{name}/status").json())


def _running(worker: WorkerProcess, name: str) -> bool:
    status = _state(worker, name)
    return (status.get("connector", {}).get("state") == "RUNNING" and bool(status["tasks"])
            and all(t["state"] == "RUNNING" for t in status["tasks"]))


def _produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    # Stamped a minute ago: records older than the topic's retention.ms go at the broker's
    # next retention check (every 5 min), on either cluster, before the mirror or the test
    # has read them (a -n 3 run's "not all replicated").
    base = (int(time.time()) - 60) * 1000
    for i in range(count):
        producer.produce(topic, f"value-{i}".encode(), f"key-{i % 7}".encode(),
                         partition=i % 3, timestamp=base + i,
                         headers=[("n", str(i).encode()), ("origin", b"A")])
    assert producer.flush(30) == 0


def _consume_part(bootstrap: str, topic: str, group: str, wanted: int
                  ) -> tuple[list[bytes], dict[int, int]]:
    """Reads exactly `wanted` records in `group` and commits just past them."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    positions: dict[int, int] = {}
    while len(values) < wanted:
        for msg in consumer.consume(50, 1.0):
            if msg.error() is None and len(values) < wanted:
                values.append(msg.value())
                positions[msg.partition()] = msg.offset() + 1
    consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in positions.items()],
                    asynchronous=False)
    consumer.close()
    return values, positions


def _read_all(bootstrap: str, topic: str, group: str | None = None) -> list[Any]:
    """Every record of `topic` up to its end now: from the group's committed offsets when
    `group` is given (earliest where it has none), else from the beginning."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group or "reader",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    tps = [TopicPartition(topic, p) for p in parts]
    ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in tps}
    if group is None:
        starts = {tp.partition: 0 for tp in tps}
    else:
        starts = {tp.partition: max(tp.offset, 0)
                  for tp in consumer.committed(tps, timeout=10)}
    consumer.assign([TopicPartition(topic, p, starts[p]) for p in parts])
    records = []
    remaining = {p for p in parts if starts[p] < ends[p]}
    deadline = time.monotonic() + 60
    while remaining:
        assert time.monotonic() < deadline, f"{topic}: partitions {remaining} never read"
        for msg in consumer.consume(500, 1.0):
            if msg.error() is None:
                records.append(msg)
                if msg.offset() + 1 >= ends[msg.partition()]:
                    remaining.discard(msg.partition())
    consumer.close()
    return records


def _count(bootstrap: str, topic: str) -> int:
    """How many records `topic` holds now; 0 while it is missing or has no leader yet."""
    try:
        return len(_read_all(bootstrap, topic))
    except KafkaException:
        return 0


def _committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    found = consumer.committed([TopicPartition(topic, p) for p in range(3)], timeout=10)
    consumer.close()
    return {tp.partition: tp.offset for tp in found if tp.offset >= 0}


def _topic_config(bootstrap: str, topic: str, name: str) -> str | None:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the answer came
    configs = admin.describe_configs([resource])[resource].result(10)
    return configs[name].value if name in configs else None


def test_a_group_fails_over_to_the_replica_cluster_and_resumes_without_skipping(
        kafka_bootstrap: str, cluster_b: BrokerProcess, worker: WorkerProcess) -> None:
    a, b = kafka_bootstrap, cluster_b.bootstrap
    run = uuid.uuid4().hex[:6]
    topic, group = f"orders-{run}", f"app-{run}"
    admin = AdminClient({"bootstrap.servers": a})
    admin.create_topics([NewTopic(topic, 3, 1, config={"retention.ms": "3600000"})]
                        )[topic].result(10)
    _produce(a, topic, RECORDS)
    read_on_a, committed_on_a = _consume_part(a, topic, group, 137)

    one = {"replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
           "checkpoints.topic.replication.factor": "1",
           "heartbeats.topic.replication.factor": "1"}
    _create(worker, f"source-{run}", _flow(
        a, b, **{"connector.class": MIRROR + "MirrorSourceConnector", "tasks.max": "2",
                 "topics": f"orders-{run},late-{run}-.*", "offset.lag.max": str(LAG_MAX),
                 "refresh.topics.interval.seconds": "1", **one}))
    _create(worker, f"checkpoint-{run}", _flow(
        a, b, **{"connector.class": "MirrorCheckpointConnector", "groups": group,
                 "topics": f"orders-{run}", "emit.checkpoints.interval.seconds": "1",
                 "sync.group.offsets.enabled": "true",
                 "sync.group.offsets.interval.seconds": "1",
                 "refresh.groups.interval.seconds": "1", **one}))
    _create(worker, f"heartbeat-{run}", _flow(
        a, b, **{"connector.class": "MirrorHeartbeat",
                 "emit.heartbeats.interval.seconds": "0.5", **one}))
    for name in ("source", "checkpoint", "heartbeat"):
        wait_for(lambda name=name: _running(worker, f"{name}-{run}"), 60,  # type: ignore[misc]
                 f"{name} never ran: {_state(worker, f'{name}-{run}')}\n{worker.log()}")

    # Every record is on B in `A.<topic>`, in its partition at its offset, as it was on A.
    remote = f"A.{topic}"
    wait_for(lambda: _count(b, remote) == RECORDS, 60, "not all replicated")
    upstream = {(m.partition(), m.offset()): m for m in _read_all(a, topic)}
    for m in _read_all(b, remote):
        original = upstream[(m.partition(), m.offset())]
        assert (m.key(), m.value(), m.headers(), m.timestamp()) == (
            original.key(), original.value(), original.headers(), original.timestamp())
    assert _topic_config(b, remote, "retention.ms") == "3600000"

    # The group's offsets arrive on B translated: never past where it stopped on A, and
    # at most the records since the last sync before it.
    def translated() -> dict[int, int] | None:
        found = _committed(b, group, remote)
        done = set(found) == set(committed_on_a) and all(
            found[p] > committed_on_a[p] - LAG_MAX for p in found)
        return found if done else None
    on_b = wait_for(translated, 60, f"no translated offsets on B: {_committed(b, group, remote)}")
    assert all(on_b[p] <= committed_on_a[p] for p in on_b)

    read_on_b = [m.value() for m in _read_all(b, remote, group)]
    everything = {f"value-{i}".encode() for i in range(RECORDS)}
    assert set(read_on_a) | set(read_on_b) == everything  # nothing skipped
    again = len(read_on_a) + len(read_on_b) - RECORDS
    assert 0 <= again < 3 * LAG_MAX, again  # re-read: under offset.lag.max per partition

    # The internal topics hold Kafka's record formats.
    def checkpoints() -> list[Checkpoint] | None:
        # the task commits the group's offsets just before its checkpoints reach the topic
        found = [c for c in (Checkpoint.decode(m.key(), m.value())
                             for m in _read_all(b, "A.checkpoints.internal")) if c.group == group]
        return found if set(on_b.items()) <= {(c.partition, c.downstream_offset)
                                              for c in found} else None
    mine = wait_for(checkpoints, 30, "the checkpoints never showed the committed offsets")
    assert all(c.topic == remote for c in mine)
    syncs = [OffsetSync.decode(m.key(), m.value())
             for m in _read_all(a, "mm2-offset-syncs.B.internal")]
    assert {(s.partition, s.upstream_offset) for s in syncs if s.topic == topic} >= {
        (p, 0) for p in range(3)}
    beats = [Heartbeat.decode(m.key(), m.value()) for m in _read_all(b, "heartbeats")]
    assert ("A", "B") in {(h.source_alias, h.target_alias) for h in beats}

    # A topic created later that matches is picked up with its partitions.
    late = f"late-{run}-1"
    admin.create_topics([NewTopic(late, 2, 1)])[late].result(10)
    producer = Producer({"bootstrap.servers": a})
    for i in range(5):
        producer.produce(late, f"late-{i}".encode(), partition=i % 2)
    producer.flush(10)
    on_b = AdminClient({"bootstrap.servers": b})
    wait_for(lambda: f"A.{late}" in on_b.list_topics(timeout=10).topics, 60,
             "the new topic was not mirrored")
    wait_for(lambda: _count(b, f"A.{late}") == 5, 60, "its records did not follow")


def test_bad_clusters_fail_with_their_reason_while_the_worker_goes_on(
        kafka_bootstrap: str, cluster_b: BrokerProcess, worker: WorkerProcess,
        tmp_path: Path) -> None:
    a, b = kafka_bootstrap, cluster_b.bootstrap
    run = uuid.uuid4().hex[:6]
    nowhere = f"127.0.0.1:{free_port()}"
    _create(worker, f"beats-{run}", _flow(a, b, **{
        "connector.class": "MirrorHeartbeatConnector",
        "heartbeats.topic.replication.factor": "1"}))

    missing = _flow(a, b, **{"connector.class": "MirrorSourceConnector"})
    del missing["source.cluster.bootstrap.servers"]
    answer = worker.request("POST", "/connectors", {"name": f"x-{run}", "config": missing})
    assert answer.status_code == 400
    assert "source.cluster.bootstrap.servers" in answer.json()["message"]
    clash = _flow(a, b, **{"connector.class": "MirrorSourceConnector",
                           "target.cluster.alias": "A"})
    answer = worker.request("POST", "/connectors", {"name": f"y-{run}", "config": clash})
    assert answer.status_code == 400 and "different aliases" in answer.json()["message"]

    quick = {"admin.timeout.ms": "1000", "replication.factor": "1",
             "offset-syncs.topic.replication.factor": "1"}
    _create(worker, f"nosource-{run}", _flow(nowhere, b, **{
        "connector.class": "MirrorSourceConnector", **quick}))
    topic = f"bad-{run}"
    admin = AdminClient({"bootstrap.servers": a})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    _create(worker, f"notarget-{run}", _flow(a, nowhere, **{
        "connector.class": "MirrorSourceConnector", "topics": topic, **quick}))

    def failed_connector() -> str | None:
        connector = _state(worker, f"nosource-{run}")["connector"]
        return connector.get("trace") if connector["state"] == "FAILED" else None
    trace = wait_for(failed_connector, 60, "the connector never failed")
    assert f"source cluster A ({nowhere}) is unreachable" in trace

    def failed_task() -> str | None:
        tasks = _state(worker, f"notarget-{run}").get("tasks")  # none yet while it starts
        return tasks[0].get("trace") if tasks and tasks[0]["state"] == "FAILED" else None
    trace = wait_for(failed_task, 60, "the task never failed")
    assert f"target cluster B ({nowhere}) is unreachable" in trace

    assert worker.get("/").status_code == 200
    wait_for(lambda: _running(worker, f"beats-{run}"), 30, "the good connector stopped")
    for name in (f"nosource-{run}", f"notarget-{run}", f"beats-{run}"):
        assert worker.request("DELETE", f"/connectors/{name}").status_code == 204


@pytest.mark.django_db
def test_the_replication_page_shows_each_flows_lag_and_the_groups_checkpoints(
        kafka_bootstrap: str, cluster_b: BrokerProcess, worker: WorkerProcess,
        client: Client, settings: SettingsWrapper) -> None:
    a, b = kafka_bootstrap, cluster_b.bootstrap
    run = uuid.uuid4().hex[:6]
    topic, group = f"page-{run}", f"page-app-{run}"
    admin = AdminClient({"bootstrap.servers": a})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(10)
    _produce(a, topic, 30)
    _, committed_on_a = _consume_part(a, topic, group, 30)
    one = {"replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
           "checkpoints.topic.replication.factor": "1"}
    _create(worker, f"page-source-{run}", _flow(a, b, **{
        "connector.class": "MirrorSourceConnector", "topics": topic, **one}))
    _create(worker, f"page-checkpoint-{run}", _flow(a, b, **{
        "connector.class": "MirrorCheckpointConnector", "groups": group, "topics": topic,
        "emit.checkpoints.interval.seconds": "1", "refresh.groups.interval.seconds": "1",
        **one}))
    settings.MILLRACE_CONNECT_URL = worker.url

    def page() -> str:
        return str(client.get("/replication/").content.decode())

    def caught_up() -> str | None:
        html = page()
        rows = re.findall(rf'data-partition="{topic}-\d">.*?data-lag>(\d+)<', html)
        return html if len(rows) == 3 and set(rows) == {"0"} else None
    html = wait_for(caught_up, 60, "the page never showed the flow caught up")
    assert f"page-source-{run}" in html and f"A.{topic}" in html
    assert "Replication" in html  # in the navigation

    def checkpoints() -> str | None:
        html = page()
        found = re.findall(rf'data-checkpoint="{group}/A\.{topic}-(\d)"><td>.*?</td><td>.*?'
                           r'</td><td>\d</td><td class="num" data-upstream>(\d+)</td>', html)
        return html if {int(p): int(o) for p, o in found} == committed_on_a else None
    wait_for(checkpoints, 60, f"no checkpoints on the page:\n{page()}")


def test_the_replication_page_says_when_the_worker_does_not_answer(
        client: Client, settings: SettingsWrapper, db: None) -> None:
    settings.MILLRACE_CONNECT_URL = f"http://127.0.0.1:{free_port()}"
    html = client.get("/replication/").content.decode()
    assert "did not answer" in html
