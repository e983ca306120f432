"""The collector while brokers die: partitions a killed leader led keep their last good
offsets (never a negative start, a start past the end or fewer messages), groups keep theirs
while a broker is down or loading its group partitions, and its Kafka clients do not flood
the log while the cluster is down."""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient, NewTopic
from django.test import override_settings
from kafka.protocol.admin import ListGroupsRequest
from kafka.protocol.consumer import OffsetFetchRequest

from clusterclient import EARLIEST, LATEST, ClusterClient, TopicPartition
from controlcenter.collector import clientlog
from controlcenter.collector.loop import Collector, CollectorConfig
from controlcenter.models import ClusterState, GroupState, PartitionState, TopicState
from tests.brokercore.wire import WireClient
from tests.brokerproc import BrokerProcess, ClusterProcess
from tests.compat.clients import new_topic

pytestmark = pytest.mark.django_db(transaction=True)
PER_PARTITION = 40


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcess]:
    with ClusterProcess(Path(tmp_path_factory.mktemp("faults")), brokers=3) as running:
        yield running


def fill(bootstrap: str, topics: dict[str, int], partitions: int) -> None:
    """Creates each topic with its replication factor and PER_PARTITION records a partition."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, partitions, rf) for t, rf in topics.items()])
    for future in futures.values():
        future.result(30)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # until every new partition has a leader to take them
        # Any broker may answer, and one may not have applied the new topics yet.
        metadata = admin.list_topics(timeout=10)
        if all(t in metadata.topics and metadata.topics[t].partitions
               and all(p.leader >= 0 for p in metadata.topics[t].partitions.values())
               for t in topics):
            break
        time.sleep(0.2)
    for topic in topics:
        for i in range(PER_PARTITION * partitions):
            producer.produce(topic, b"v", partition=i % partitions)
    assert producer.flush(30) == 0


def a_leader_to_kill(cluster: ClusterProcess, topic: str) -> int:
    """A broker that leads some of `topic`'s partitions and is not the active controller."""
    status = cluster.status()
    leaders = {b["id"]: b for b in status["brokers"]}
    metadata = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(timeout=10)
    led = {p.leader for p in metadata.topics[topic].partitions.values()}
    return int(next(n for n in sorted(led)
                    if n in leaders and n != status["active_controller"]))


def test_list_offsets_of_a_partition_whose_leader_just_died_is_an_error_value(
        cluster: ClusterProcess) -> None:
    topic = new_topic("dying")
    fill(cluster.bootstrap, {topic: 1}, partitions=6)
    client = ClusterClient(cluster.bootstrap, timeout=3.0, metadata_ttl=0.0)
    victim = a_leader_to_kill(cluster, topic)
    led = {TopicPartition(topic, p.partition) for p in client.metadata().topics[topic].partitions
           if p.leader == victim}
    cluster.kill(victim)
    try:
        # librdkafka still sends to the dead leader (the metadata has not moved yet) and
        # answers its partitions with offset -1001 and no error.
        for query in (LATEST, EARLIEST):
            answer = client.list_offsets(dict.fromkeys(
                [TopicPartition(topic, p) for p in range(6)], query))
            assert set(answer.errors) == led
            assert {e.code_name for e in answer.errors.values()} <= {
                "OFFSET_NOT_AVAILABLE", "LEADER_NOT_AVAILABLE"}  # the latter once it moved
            expected = 0 if query is EARLIEST else PER_PARTITION
            assert {o.offset for o in answer.offsets.values()} == {expected}
    finally:
        cluster.start(victim)


def groups_by_broker(cluster: ClusterProcess) -> str:
    """What each broker answers ListGroups, and the cluster's status: for a failure message."""
    status = cluster.status()
    answers = {}
    for broker in status["brokers"]:
        try:
            with WireClient(cluster.bootstrap_of(broker["id"])) as wire:
                answers[broker["id"]] = wire.request(ListGroupsRequest(states_filter=[]), 4)
        except Exception as exc:  # noqa: BLE001 - a failure message's diagnostics only
            answers[broker["id"]] = exc
    return f"ListGroups {answers}; status {status}"


def offsets_now(topics: list[str]) -> dict[tuple[str, int], tuple[int | None, int | None]]:
    return {(r.topic, r.partition): (r.log_start_offset, r.log_end_offset)
            for r in PartitionState.objects.filter(topic__in=topics)}


def test_partitions_of_a_killed_leader_keep_their_last_good_offsets(
        cluster: ClusterProcess) -> None:
    replicated, single = new_topic("rf3"), new_topic("rf1")
    topics = {replicated: 3, single: 1}
    fill(cluster.bootstrap, topics, partitions=6)
    group = f"g-{uuid.uuid4().hex[:8]}"  # 10 of each partition's 40 committed: lag 180
    # Retried per partition: the broker the previous test restarted takes its group
    # partitions back meanwhile, and a commit then meets NOT_COORDINATOR or
    # COORDINATOR_LOAD_IN_PROGRESS, which the admin client reports per partition and does
    # not retry (a CI run lost the whole commit that way and saw no group).
    commit_all(cluster.bootstrap, [(group, {(t, p): 10 for t in topics for p in range(3)})])
    with override_settings(KAFKA_BOOTSTRAP_SERVERS=cluster.bootstrap):
        collector = Collector(CollectorConfig(bootstrap_servers=cluster.bootstrap, interval=2.0,
                                              history_topics=False))
    victim = a_leader_to_kill(cluster, single)
    # The baseline: a cycle that sees everything. A broker the previous test restarted may
    # still be loading its group partitions, and then ListGroups leaves the group out.
    deadline = time.monotonic() + 60
    while True:
        collector.cycle()
        good = offsets_now(list(topics))
        lags = list(GroupState.objects.filter(group_id=group).values_list("total_lag", flat=True))
        if (set(good.values()) == {(0, PER_PARTITION)} and lags == [180]) \
                or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert set(good.values()) == {(0, PER_PARTITION)}
    assert lags == [180], f"group {group} not collected in 60 s: {groups_by_broker(cluster)}"
    cluster.kill(victim)
    try:
        seen = []
        for i in range(4):
            if i == 2:
                collector.sampler.log_start_read = 0.0  # the once-a-minute refresh is due
            collector.cycle()
            seen.append((offsets_now(list(topics)), dict(
                TopicState.objects.filter(name__in=topics).values_list("name", "total_messages")),
                ClusterState.objects.get(bootstrap_servers=cluster.bootstrap).reachable,
                GroupState.objects.get(group_id=group).total_lag))
    finally:
        collector.close()
        cluster.start(victim)
    # Nothing was produced, consumed or deleted, and two brokers answer all along: every
    # cycle shows what the last good one did, on a reachable cluster.
    for cycle, (offsets, totals, reachable, lag) in enumerate(seen):
        where = f"cycle {cycle} after killing broker {victim}"
        assert offsets == good, where
        assert totals == dict.fromkeys(topics, 6 * PER_PARTITION), where
        assert reachable and lag == 180, where


GROUPS = 60
HISTORY_PARTITIONS = 100  # offsets a history commit writes at once
HISTORY_COMMITS = 800  # 80,000 records in the one __consumer_offsets partition


def commit_all(bootstrap: str, commits: list[tuple[str, dict[tuple[str, int], int]]]) -> None:
    """Each (group, {(topic, partition): offset}) committed, all requests in flight at once;
    those refused (a coordinator still taking its partition: NOT_COORDINATOR) again."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    pending = dict(enumerate(commits))
    deadline = time.monotonic() + 120
    while pending:
        assert time.monotonic() < deadline, f"commits refused: {list(pending.values())[:3]}"
        futures = {n: admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
            group, [confluent_kafka.TopicPartition(t, p, o) for (t, p), o in offsets.items()])
        ])[group] for n, (group, offsets) in pending.items()}
        for n, future in futures.items():
            if all(tp.error is None for tp in future.result(120).topic_partitions):
                del pending[n]
        time.sleep(0.2 if pending else 0)


def long_group_history(bootstrap: str) -> str:
    """A group that committed many times, so that its __consumer_offsets partition takes
    a restarted broker some time to replay."""
    history, group = new_topic("history"), f"history-{uuid.uuid4().hex[:6]}"
    fill(bootstrap, {history: 1}, partitions=HISTORY_PARTITIONS)
    commit_all(bootstrap, [(group, {(history, p): round_ for p in range(HISTORY_PARTITIONS)})
                           for round_ in range(HISTORY_COMMITS)])
    return group


def coordinator_codes(bootstrap: str, group_id: str) -> tuple[int, int]:
    """(OffsetFetch of the group, ListGroups) error codes, asked over the wire."""
    with WireClient(bootstrap) as wire:
        return (wire.request(OffsetFetchRequest(group_id=group_id, topics=None), 5).error_code,
                wire.request(ListGroupsRequest(states_filter=[]), 4).error_code)


def test_groups_of_a_restarted_broker_never_leave_the_collector(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory({"offsets.topic.num.partitions": "1"})
    topic = new_topic("many-groups")
    fill(broker.bootstrap, {topic: 1}, partitions=4)
    groups = [f"many-{uuid.uuid4().hex[:6]}-{n}" for n in range(GROUPS)]  # lag 4 x 30
    commit_all(broker.bootstrap, [(g, {(topic, p): 10 for p in range(4)}) for g in groups])
    history = long_group_history(broker.bootstrap)
    with override_settings(KAFKA_BOOTSTRAP_SERVERS=broker.bootstrap):
        collector = Collector(CollectorConfig(bootstrap_servers=broker.bootstrap, interval=1.0,
                                              history_topics=False))
    seen: list[dict[str, int]] = []
    before: list[int] = []  # what ListGroups answered just before each cycle

    def lags() -> dict[str, int]:
        collector.cycle()
        return dict(GroupState.objects.filter(group_id__in=groups).values_list(
            "group_id", "total_lag"))

    try:
        deadline = time.monotonic() + 60
        while (found := lags()) != dict.fromkeys(groups, 120):  # the baseline: all groups
            assert time.monotonic() < deadline, f"the collector never saw every group: {found}"
            time.sleep(0.5)
        broker.kill()
        broker.start()
        # Until the broker leads its group partition again, OffsetFetch may meet
        # NOT_COORDINATOR, which crashes librdkafka 2.16's admin client (librdkafka #5040):
        # the collector starts once the broker is the coordinator, loading or loaded.
        while (codes := coordinator_codes(broker.bootstrap, history))[0] not in (0, 14):
            time.sleep(0.01)
        while True:  # a cycle after each probe, until one after the load
            before.append(codes[1])
            seen.append(lags())
            if codes[0] == 0:
                break
            codes = coordinator_codes(broker.bootstrap, history)
    finally:
        collector.close()
    for cycle, found in enumerate(seen):
        wrong = {g: found.get(g) for g in groups if found.get(g) != 120}
        assert not wrong, f"cycle {cycle} of {len(seen)} after the restart: {wrong}"
    # A cycle began while ListGroups answered COORDINATOR_LOAD_IN_PROGRESS: the load was met.
    assert 14 in before, before


def test_librdkafka_logs_one_line_of_each_kind_while_the_cluster_is_down(
        broker_factory: Callable[..., BrokerProcess], capfd: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    broker = broker_factory()
    with override_settings(KAFKA_BOOTSTRAP_SERVERS=broker.bootstrap):
        collector = Collector(CollectorConfig(bootstrap_servers=broker.bootstrap, interval=1.0))
    try:
        collector.cycle()  # history topics created, producer connected
        broker.kill()
        capfd.readouterr()
        caplog.clear()
        with caplog.at_level(logging.INFO, logger=clientlog.__name__):
            until = time.monotonic() + 12
            while time.monotonic() < until:  # every request and produce meets a refusal
                collector.cycle()
                time.sleep(0.5)
    finally:
        broker.start()
        collector.close()
    # Before: librdkafka wrote about a line a second per client straight to stderr.
    assert "millrace-collector#" not in capfd.readouterr().err
    kinds = Counter((r.levelname, *tuple(r.args or ())[:2]) for r in caplog.records
                    if r.name == clientlog.__name__)
    assert kinds and max(kinds.values()) == 1, kinds
    assert any("Connection refused" in r.getMessage() for r in caplog.records)


def test_the_client_log_filter_passes_one_line_of_a_kind_a_minute_and_counts_the_rest() -> None:
    now = [0.0]
    once = clientlog.OncePerInterval(every=60, clock=lambda: now[0])

    def line(client: str) -> logging.LogRecord:
        return logging.LogRecord("x", logging.ERROR, __file__, 1, "%s [%s] %s",
                                 ("FAIL", client, "Connection refused"), None)

    assert once.filter(line("admin"))
    assert not once.filter(line("admin")) and not once.filter(line("admin"))
    assert once.filter(line("producer"))  # another client is another kind
    now[0] = 61.0
    record = line("admin")
    assert once.filter(record)
    assert record.getMessage().endswith("(2 alike in the last 60s not shown)")
