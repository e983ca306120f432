"""ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments.

On the wire against one real broker, with kafka-python's and confluent-kafka's admin
clients and raw requests at every version we serve. With one broker nothing can move, so
these check the refusals and no-ops; moves themselves are in the cluster tests."""

from __future__ import annotations

from typing import Any

import confluent_kafka
import confluent_kafka.admin
import kafka
import pytest
from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
)

from brokercore.protocol.errors import ErrorCode
from tests.brokercore.wire import WireClient
from tests.compat.clients import new_topic

Reassign = AlterPartitionReassignmentsRequest.ReassignableTopic
ReassignPartition = Reassign.ReassignablePartition


@pytest.fixture
def topic(kafka_bootstrap: str) -> str:
    """Two partitions, both led by their preferred (and only) replica."""
    name = new_topic("lead")
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([confluent_kafka.admin.NewTopic(name, 2, 1)])[name].result(timeout=15)
    return name


def elect(client: WireClient, version: int, topics: list[tuple[str, list[int]]] | None,
          election_type: int = 0) -> tuple[int | None, dict[tuple[str, int], int]]:
    parts = None if topics is None else [
        ElectLeadersRequest.TopicPartitions(topic=t, partitions=p) for t, p in topics]
    response = client.request(ElectLeadersRequest(
        election_type=election_type, topic_partitions=parts, timeout_ms=5000), version=version)
    results = {(r.topic, p.partition_id): p.error_code
               for r in response.replica_election_results for p in r.partition_result}
    return (response.error_code if version >= 1 else None), results


@pytest.mark.parametrize("version", [0, 1, 2])
def test_elect_leaders_answers_per_partition_at_every_version(
    client: WireClient, topic: str, version: int
) -> None:
    top, results = elect(client, version, [(topic, [0, 1, 7]), ("no-such-topic", [0])])
    assert top in (None, ErrorCode.NONE)
    assert results == {
        (topic, 0): ErrorCode.ELECTION_NOT_NEEDED,
        (topic, 1): ErrorCode.ELECTION_NOT_NEEDED,
        (topic, 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }


def test_unclean_election_of_a_led_partition_is_not_needed(client: WireClient, topic: str) -> None:
    _, results = elect(client, 2, [(topic, [0])], election_type=1)
    assert results == {(topic, 0): ErrorCode.ELECTION_NOT_NEEDED}


def test_electing_every_partition_lists_only_those_that_needed_it(
    client: WireClient, topic: str
) -> None:
    top, results = elect(client, 2, None)
    assert (top, results) == (ErrorCode.NONE, {})


def test_an_unknown_election_type_is_an_invalid_request(client: WireClient, topic: str) -> None:
    top, results = elect(client, 2, [(topic, [0])], election_type=5)
    assert top == ErrorCode.INVALID_REQUEST
    assert results == {(topic, 0): ErrorCode.INVALID_REQUEST}


def test_confluent_kafka_elect_leaders(kafka_bootstrap: str, topic: str) -> None:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": kafka_bootstrap})
    tps = [confluent_kafka.TopicPartition(topic, 0), confluent_kafka.TopicPartition(topic, 9)]
    future = admin.elect_leaders(confluent_kafka.ElectionType.PREFERRED, tps)
    errors = {(tp.topic, tp.partition): error.code() for tp, error in
              future.result(timeout=15).items()}
    assert errors == {
        (topic, 0): confluent_kafka.KafkaError.ELECTION_NOT_NEEDED,
        (topic, 9): confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART,
    }


def test_kafka_python_elect_leaders(kafka_bootstrap: str, topic: str) -> None:
    admin = kafka.KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        response = admin.elect_leaders(0, {topic: [0, 1]})
    finally:
        admin.close()
    assert {p.error_code for r in response.replica_election_results
            for p in r.partition_result} == {ErrorCode.ELECTION_NOT_NEEDED}


# -- reassignments ----------------------------------------------------------------------------
def reassign(client: WireClient, version: int, changes: dict[tuple[str, int], list[int] | None],
             **fields: Any) -> tuple[int, dict[tuple[str, int], int]]:
    by_topic: dict[str, list[Any]] = {}
    for (name, partition), replicas in changes.items():
        by_topic.setdefault(name, []).append(
            ReassignPartition(partition_index=partition, replicas=replicas))
    response = client.request(AlterPartitionReassignmentsRequest(
        timeout_ms=5000, topics=[Reassign(name=n, partitions=p) for n, p in by_topic.items()],
        **fields), version=version)
    return response.error_code, {(t.name, p.partition_index): p.error_code
                                 for t in response.responses for p in t.partitions}


def list_reassignments(client: WireClient, topics: list[tuple[str, list[int]]] | None) -> Any:
    request_topics = None if topics is None else [
        ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics(
            name=t, partition_indexes=p) for t, p in topics]
    return client.request(
        ListPartitionReassignmentsRequest(timeout_ms=5000, topics=request_topics), version=0)


@pytest.mark.parametrize("version", [0, 1])
def test_reassignments_that_one_broker_must_refuse(
    client: WireClient, topic: str, version: int
) -> None:
    top, results = reassign(client, version, {
        (topic, 0): [1, 2],  # broker 2 is not registered
        (topic, 1): None,  # nothing to cancel
        ("no-such-topic", 0): [1],
    })
    assert top == ErrorCode.NONE
    assert results == {
        (topic, 0): ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        (topic, 1): ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
        ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }


def test_reassigning_to_the_current_replicas_is_accepted_and_nothing_is_ongoing(
    client: WireClient, topic: str
) -> None:
    assert reassign(client, 1, {(topic, 0): [1]}) == (ErrorCode.NONE,
                                                       {(topic, 0): ErrorCode.NONE})
    response = list_reassignments(client, [(topic, [0, 1, 5])])
    assert (response.error_code, response.topics) == (ErrorCode.NONE, [])
    assert list_reassignments(client, None).topics == []


def test_v1_refuses_a_replication_factor_change_when_asked_to(
    client: WireClient, topic: str
) -> None:
    _, results = reassign(client, 1, {(topic, 0): [1, 2]}, allow_replication_factor_change=False)
    assert results == {(topic, 0): ErrorCode.INVALID_REPLICATION_FACTOR}


def test_kafka_python_reassignment_calls(kafka_bootstrap: str, topic: str) -> None:
    admin = kafka.KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        results = admin.alter_partition_reassignments(
            {kafka.TopicPartition(topic, 0): [1], kafka.TopicPartition(topic, 1): None})
        listed = admin.list_partition_reassignments()
    finally:
        admin.close()
    assert results[kafka.TopicPartition(topic, 0)] is None
    assert results[kafka.TopicPartition(topic, 1)] is kafka.errors.NoReassignmentInProgressError
    assert listed == {}
