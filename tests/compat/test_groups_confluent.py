"""Consumer groups through confluent-kafka (librdkafka) against the built-in broker."""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Callable
from typing import Any

import confluent_kafka
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient

from tests.brokerproc import BrokerProcess
from tests.compat.groups import (
    BROKER_OVERRIDES,
    HEARTBEAT_MS,
    PARTITIONS,
    SESSION_MS,
    PollingMember,
    Record,
    create_topic,
    partitioned,
    produce,
    start_assigned_victim,
    values,
    wait_until,
)

Member = tuple[confluent_kafka.Consumer, PollingMember]


def _member(bootstrap: str, topic: str, group: str) -> Member:
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "session.timeout.ms": SESSION_MS,
        "heartbeat.interval.ms": HEARTBEAT_MS,
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


def _drain(consumer: confluent_kafka.Consumer, end: int) -> None:
    """Poll until this member's position is `end` on every partition it owns."""
    def at_end() -> bool:
        consumer.poll(0.05)
        positions = consumer.position(consumer.assignment())
        return all(tp.offset == end for tp in positions)

    wait_until(at_end, "the member to reach the end of its partitions")


def _committed(admin: AdminClient, group: str) -> dict[int, int]:
    [future] = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)]).values()
    return {tp.partition: tp.offset for tp in future.result(15).topic_partitions}


def _listed(admin: AdminClient) -> dict[str, Any]:
    listed = admin.list_consumer_groups().result(15)
    return {g.group_id: g.state for g in listed.valid}


def test_three_members_share_partitions_commit_and_resume_after_a_restart(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory(BROKER_OVERRIDES)
    topic = create_topic(broker.bootstrap, "grp-confluent")
    produce(broker.bootstrap, topic, 5, "first")
    group = f"g-{uuid.uuid4().hex[:8]}"

    members: list[Member] = []
    for size in (1, 2, 3):
        members.append(_member(broker.bootstrap, topic, group))
        wait_until(
            functools.partial(lambda n: partitioned([m.assignment for _, m in members], n), size),
            f"{size} member(s) to own every partition once")
    leaver, leaving = members.pop(0)  # the first leader leaves
    leaving.stop()
    leaver.close()
    wait_until(lambda: partitioned([m.assignment for _, m in members], 2),
               "the two remaining members to take over")
    for consumer, member in members:
        member.stop()
        _drain(consumer, 5)
    for consumer, _ in members:
        consumer.commit(asynchronous=False)
    for consumer, _ in members:
        consumer.close()

    broker.restart()

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert _listed(admin)[group] == confluent_kafka.ConsumerGroupState.EMPTY
    assert _committed(admin, group) == dict.fromkeys(range(PARTITIONS), 5)
    second = produce(broker.bootstrap, topic, 1, "second")
    consumer, member = _member(broker.bootstrap, topic, group)
    wait_until(lambda: len(member.consumed) >= len(second), "the messages after the commit")
    time.sleep(0.5)
    member.stop()
    assert sorted(values(member.consumed)) == sorted(second)
    consumer.close()

    [deleted] = admin.delete_consumer_groups([group]).values()
    deleted.result(15)
    assert group not in _listed(admin)


def test_a_member_that_stops_heartbeating_is_evicted(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory(BROKER_OVERRIDES)
    topic = create_topic(broker.bootstrap, "grp-confluent-dead")
    group = f"g-{uuid.uuid4().hex[:8]}"
    victim = start_assigned_victim("confluent", broker.bootstrap, topic, group)
    consumer, survivor = _member(broker.bootstrap, topic, group)
    wait_until(lambda: 0 < len(survivor.assignment) < PARTITIONS, "the partitions to be shared")

    victim.kill()
    victim.wait()

    killed_at = time.monotonic()
    wait_until(lambda: len(survivor.assignment) == PARTITIONS, "the survivor to own everything")
    assert time.monotonic() - killed_at > SESSION_MS / 1000 / 2  # evicted by the session
    survivor.stop()
    consumer.close()
