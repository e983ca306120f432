"""KIP-848 consumer groups through confluent-kafka (`group.protocol=consumer`), real sockets.

The broker's KIP-848 timeouts are shortened (`OVERRIDES`) so that a crash is noticed in
seconds; nothing here asserts a timing, the waits only bound a hang.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, ConsumerGroupType
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from tests.brokerproc import REPO, BrokerProcess, ClusterProcess
from tests.cluster.faults import FAST_FAILOVER, ClusterView
from tests.compat.groups import (
    PARTITIONS,
    PollingMember,
    Record,
    create_topic,
    partitioned,
    produce,
    values,
    wait_until,
)

OVERRIDES = {
    "group.consumer.session.timeout.ms": "3000",
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.heartbeat.interval.ms": "300",
    "group.consumer.min.heartbeat.interval.ms": "100",
}
Member = tuple[confluent_kafka.Consumer, PollingMember]


def _member(bootstrap: str, topic: str, group: str, **config: str) -> Member:
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
        "enable.auto.commit": False, "auto.offset.reset": "earliest", **config,
    })
    consumer.subscribe([topic])

    def poll() -> list[Record]:
        msg = consumer.poll(0.1)
        if msg is None or msg.error() is not None:
            return []
        return [(msg.partition(), msg.offset(), msg.value())]

    def owned() -> set[int]:
        return {tp.partition for tp in consumer.assignment()}

    return consumer, PollingMember(poll, owned).start()


def _close(member: Member) -> None:
    consumer, polling = member
    polling.stop()
    consumer.close()


def _wait_partitioned(members: list[Member], what: str) -> None:
    wait_until(lambda: partitioned([m.assignment for _, m in members], len(members)), what)


def _group() -> str:
    return f"kip848-{uuid.uuid4().hex[:8]}"


def test_members_join_and_leave_and_every_partition_ends_with_one_owner(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory(OVERRIDES)
    topic = create_topic(broker.bootstrap, "kip848")
    group = _group()
    members: list[Member] = []
    for size in (1, 2, 3):
        members.append(_member(broker.bootstrap, topic, group))
        _wait_partitioned(members, f"{size} member(s) to own every partition once")
    for size in (2, 1):
        _close(members.pop(0))
        _wait_partitioned(members, f"the {size} remaining member(s) to take over")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    [described] = admin.describe_consumer_groups([group]).values()
    description = described.result(15)
    assert description.type == ConsumerGroupType.CONSUMER
    assert description.state == confluent_kafka.ConsumerGroupState.STABLE
    [only] = description.members
    assert {tp.partition for tp in only.assignment.topic_partitions} == set(range(PARTITIONS))
    _close(members.pop())


def test_a_new_member_resumes_from_the_committed_offsets(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory(OVERRIDES)
    topic = create_topic(broker.bootstrap, "kip848-commit")
    first = produce(broker.bootstrap, topic, 3, "first")
    group = _group()
    consumer, member = _member(broker.bootstrap, topic, group)
    wait_until(lambda: len(member.consumed) >= len(first), "the first messages")
    member.stop()
    assert sorted(values(member.consumed)) == sorted(first)
    consumer.commit(asynchronous=False)  # OffsetCommit v9 with the member epoch
    consumer.close()

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    [future] = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]).values()
    committed = {tp.partition: tp.offset for tp in future.result(15).topic_partitions}
    assert committed == dict.fromkeys(range(PARTITIONS), 3)

    second = produce(broker.bootstrap, topic, 1, "second")
    consumer, member = _member(broker.bootstrap, topic, group)
    wait_until(lambda: len(member.consumed) >= len(second), "the messages after the commit")
    time.sleep(0.5)  # room for a wrongly re-read first message to show up
    _close((consumer, member))
    assert sorted(values(member.consumed)) == sorted(second)

    [deleted] = admin.delete_consumer_groups([group]).values()  # empty now: deletable
    deleted.result(15)
    assert group not in {g.group_id for g in admin.list_consumer_groups().result(15).valid}


VICTIM = """
import sys, confluent_kafka
bootstrap, topic, group = sys.argv[1:4]
consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
    "group.protocol": "consumer", "auto.offset.reset": "earliest"})
consumer.subscribe([topic])
announced = False
while True:
    consumer.poll(0.2)
    if consumer.assignment() and not announced:
        print("victim assigned", flush=True)
        announced = True
"""


def test_a_crashed_members_partitions_move_when_its_session_ends(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory(OVERRIDES)
    topic = create_topic(broker.bootstrap, "kip848-crash")
    group = _group()
    victim = subprocess.Popen([sys.executable, "-c", VICTIM, broker.bootstrap, topic, group],
                              cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert victim.stdout is not None
        assert "victim assigned" in victim.stdout.readline()
        survivor = _member(broker.bootstrap, topic, group)
        wait_until(lambda: 0 < len(survivor[1].assignment) < PARTITIONS,
                   "the partitions to be shared")
    finally:
        victim.kill()  # no leave heartbeat: only the session timeout can free its share
        victim.wait()
    wait_until(lambda: survivor[1].assignment == set(range(PARTITIONS)),
               "the survivor to own every partition")
    _close(survivor)


def test_classic_and_consumer_groups_are_listed_side_by_side(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory({**OVERRIDES, "group.min.session.timeout.ms": "1000"})
    topic = create_topic(broker.bootstrap, "kip848-mixed")
    classic_group, consumer_group = _group(), _group()
    members = [_member(broker.bootstrap, topic, classic_group, **{"group.protocol": "classic",
                       "session.timeout.ms": "3000", "heartbeat.interval.ms": "300"}),
               _member(broker.bootstrap, topic, consumer_group)]
    wait_until(lambda: all(len(m.assignment) == PARTITIONS for _, m in members),
               "both groups to own the topic")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def listed(**kw: object) -> dict[str, ConsumerGroupType]:
        result = admin.list_consumer_groups(**kw).result(15)
        return {g.group_id: g.type for g in result.valid}

    everything = listed()
    assert everything[classic_group] == ConsumerGroupType.CLASSIC
    assert everything[consumer_group] == ConsumerGroupType.CONSUMER
    only_consumer = listed(types={ConsumerGroupType.CONSUMER})
    assert consumer_group in only_consumer and classic_group not in only_consumer
    descriptions = {g: f.result(15) for g, f in
                    admin.describe_consumer_groups([classic_group, consumer_group]).items()}
    assert descriptions[classic_group].type == ConsumerGroupType.CLASSIC
    assert descriptions[consumer_group].type == ConsumerGroupType.CONSUMER
    assert all(len(d.members) == 1 for d in descriptions.values())
    for member in members:
        _close(member)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcess]:
    with ClusterProcess(tmp_path / "cluster", brokers=3,
                        overrides={**FAST_FAILOVER, **OVERRIDES}) as c:
        yield c


def test_the_group_carries_on_after_its_coordinator_is_killed(cluster: ClusterProcess) -> None:
    topic = f"kip848-failover-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(15)
    view = ClusterView(cluster.bootstrap)
    view.fully_replicated(topic)
    group = _group()
    members = [_member(cluster.bootstrap, topic, group) for _ in range(2)]
    _wait_partitioned(members, "two members to share the topic")
    before = produce(cluster.bootstrap, topic, 2, "before")
    wait_until(lambda: set(values([r for _, m in members for r in m.consumed])) >= before,
               "the messages before the kill")
    coordinator = view.group_coordinator(group)
    cluster.kill(coordinator)

    after = produce(cluster.bootstrap, topic, 2, "after")
    wait_until(lambda: set(values([r for _, m in members for r in m.consumed])) >= after,
               "the messages produced after the coordinator died", timeout=60)
    third = _member(cluster.bootstrap, topic, group)
    members.append(third)
    _wait_partitioned(members, "a third member to join under the new coordinator")
    new_coordinator = view.group_coordinator(group)
    assert new_coordinator != coordinator
    # The new coordinator replayed the group: the two members carried on with their epochs
    # and only the third one joined there.
    joins = [line for line in cluster.broker_log(new_coordinator).splitlines()
             if f"group {group}: member" in line and "joined" in line]
    assert len(joins) == 1, joins
    for member in members:
        _close(member)


def test_a_regex_subscription_follows_new_topics_and_new_partitions(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory(OVERRIDES)
    prefix = f"kip848-re-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(f"{prefix}-a", 2, 1)])[f"{prefix}-a"].result(15)
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": _group(),
        "group.protocol": "consumer", "topic.metadata.refresh.interval.ms": 500,
    })
    consumer.subscribe([f"^{prefix}-.*"])  # sent as SubscribedTopicRegex (v1)
    wanted = {(f"{prefix}-a", 0), (f"{prefix}-a", 1)}

    def assigned() -> set[tuple[str, int]]:
        consumer.poll(0.1)
        return {(tp.topic, tp.partition) for tp in consumer.assignment()}

    wait_until(lambda: assigned() == wanted, "the matching topic's partitions")
    admin.create_topics([NewTopic(f"{prefix}-b", 1, 1)])[f"{prefix}-b"].result(15)
    wanted.add((f"{prefix}-b", 0))
    wait_until(lambda: assigned() == wanted, "the partition of a topic created later")
    admin.create_partitions([NewPartitions(f"{prefix}-a", 3)])[f"{prefix}-a"].result(15)
    wanted.add((f"{prefix}-a", 2))
    wait_until(lambda: assigned() == wanted, "the partition added to a topic")
    consumer.close()


def test_a_static_member_restarting_gets_its_partitions_back_without_a_rebalance(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory(OVERRIDES)
    topic = create_topic(broker.bootstrap, "kip848-static")
    group = _group()
    static = {"group.instance.id": "static-1"}
    members = [_member(broker.bootstrap, topic, group, **static),
               _member(broker.bootstrap, topic, group)]
    _wait_partitioned(members, "the two members to share the topic")
    before = [set(m.assignment) for _, m in members]
    seen_by_other: list[set[int]] = []

    def back() -> bool:
        seen_by_other.append(set(members[1][1].assignment))
        return partitioned([m.assignment for _, m in members], 2)

    _close(members[0])  # a static member leaves with epoch -2: it keeps its partitions
    members[0] = _member(broker.bootstrap, topic, group, **static)
    wait_until(back, "the restarted static member to be back")
    assert [set(m.assignment) for _, m in members] == before
    assert all(seen == before[1] for seen in seen_by_other)  # never reassigned meanwhile
    assert "static member static-1 is back as" in broker.output.read_text()
    for member in members:
        _close(member)
