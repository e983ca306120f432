"""A restarted broker replays a long `__consumer_offsets` partition: until it has, group
requests answer COORDINATOR_LOAD_IN_PROGRESS, real clients retry, and they get the offsets
as committed, never those of a half-loaded partition."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import confluent_kafka
import kafka
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin import ListGroupsRequest
from kafka.protocol.consumer import OffsetFetchRequest

from tests.brokercore.wire import WireClient
from tests.brokerproc import BrokerProcess
from tests.compat.clients import new_topic

PARTITIONS = 50
COMMITS = 2000  # 100,000 offset records in one partition of __consumer_offsets
GROUP = "long-history"


def _commit_history(bootstrap: str, topic: str) -> dict[int, int]:
    """Many commits of every partition by a real consumer; the offsets committed last.

    The asynchronous commits are all acknowledged before the last, synchronous one is sent:
    librdkafka retries an asynchronous commit that met a retriable error, and a retry that
    lands after the last commit would rightly make an older offset the committed one (a
    loaded run once read commit 1,978's offsets back instead of commit 1,999's)."""
    done: list[confluent_kafka.KafkaError | None] = []
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
        "on_commit": lambda err, _partitions: done.append(err)})
    try:
        for n in range(COMMITS - 1):
            offsets = [confluent_kafka.TopicPartition(topic, p, n * 10 + p)
                       for p in range(PARTITIONS)]
            consumer.commit(offsets=offsets, asynchronous=True)
        deadline = time.monotonic() + 120
        while len(done) < COMMITS - 1 and time.monotonic() < deadline:
            consumer.poll(0.1)  # serves the commits' callbacks
        assert len(done) == COMMITS - 1 and not any(done), [e for e in done if e]
        consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, p, (COMMITS - 1) * 10 + p)
                                 for p in range(PARTITIONS)], asynchronous=False)
    finally:
        consumer.close()
    return {p: (COMMITS - 1) * 10 + p for p in range(PARTITIONS)}


def _probe_until_loaded(bootstrap: str, topic: str, expected: dict[int, int]
                        ) -> tuple[list[int], list[int]]:
    """OffsetFetch and ListGroups over and over from the first moment; each answer's error
    code. An answer without an error must hold every committed offset, or list the group."""
    request = OffsetFetchRequest(group_id=GROUP, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=list(
            range(PARTITIONS)))])
    codes: list[int] = []
    listing: list[int] = []
    # From before the broker is ready: the load starts as it comes up.
    with WireClient.as_soon_as_listening(bootstrap) as client:
        while not codes or codes[-1] != 0:
            response = client.request(request, version=5)
            codes.append(response.error_code)
            if response.error_code == 0:
                [answer] = response.topics
                assert {p.partition_index: p.committed_offset
                        for p in answer.partitions} == expected, "a half-loaded answer"
            listed = client.request(ListGroupsRequest(states_filter=[]), 4)
            listing.append(listed.error_code)
            names = [g.group_id for g in listed.groups]  # before leading it: none, no error
            assert names in ([], [] if listed.error_code else [GROUP]), (listing, names)
    assert names == [GROUP]  # once loaded
    return codes, listing


def test_a_coordinator_loading_a_long_partition_answers_load_in_progress_and_clients_retry(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory({"offsets.topic.num.partitions": "1"})
    topic = new_topic("load")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(timeout=30)
    expected = _commit_history(broker.bootstrap, topic)
    broker.stop()
    with ThreadPoolExecutor(1) as pool:
        probe = pool.submit(_probe_until_loaded, broker.bootstrap, topic, expected)
        broker.start()
        codes, listing = probe.result(timeout=120)
    # Retriable errors only (the first requests may even beat the partition's leadership),
    # COORDINATOR_LOAD_IN_PROGRESS among them: the load was seen from outside.
    assert set(codes[:-1]) <= {14, 15, 16} and 14 in codes, codes
    # ListGroups too, as Kafka 4.0: COORDINATOR_LOAD_IN_PROGRESS, never a list without it.
    assert 14 in listing, listing

    broker.stop()
    broker.start()  # a second load, which the real clients meet
    started = time.monotonic()
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap,
                                         "group.id": GROUP})
    try:
        committed = consumer.committed(
            [confluent_kafka.TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=60)
    finally:
        consumer.close()
    assert {tp.partition: tp.offset for tp in committed} == expected
    legacy = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=GROUP,
                                 enable_auto_commit=False)
    try:
        assert {p: legacy.committed(kafka.TopicPartition(topic, p))
                for p in range(PARTITIONS)} == expected
    finally:
        legacy.close()
    assert time.monotonic() - started < 120  # bounds a hang only
