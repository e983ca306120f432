"""CreateTopics, DeleteTopics and CreatePartitions on the wire: the errors clients hide."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kafka.protocol.admin import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
)
from kafka.protocol.metadata import MetadataRequest

from brokercore.protocol.errors import ErrorCode
from tests.brokercore.wire import WireClient
from tests.compat.clients import new_topic

Topic = CreateTopicsRequest.CreatableTopic
Assignment = Topic.CreatableReplicaAssignment
Config = Topic.CreatableTopicConfig


@pytest.fixture
def client(kafka_bootstrap: str) -> Any:
    with WireClient(kafka_bootstrap) as wire:
        yield wire


def create(client: WireClient, *topics: Any, validate_only: bool = False,
           version: int = 5) -> dict[str, Any]:
    request = CreateTopicsRequest(topics=list(topics), timeout_ms=5000,
                                  validate_only=validate_only)
    return {t.name: t for t in client.request(request, version=version).topics}


def topic(name: str, partitions: int = 1, rf: int = 1, assignments: Any = (),
          **configs: str | None) -> Any:
    return Topic(name=name, num_partitions=partitions, replication_factor=rf,
                 assignments=list(assignments),
                 configs=[Config(name=k.replace("_", "."), value=v) for k, v in configs.items()])


def exists(client: WireClient, name: str) -> bool:
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                              allow_auto_topic_creation=False)
    [described] = client.request(request, version=8).topics
    return bool(described.error_code == ErrorCode.NONE)


@pytest.mark.parametrize("name", ["", "..", "has space", "x" * 250, "slash/topic"])
def test_it_refuses_illegal_topic_names(client: WireClient, name: str) -> None:
    result = create(client, topic(name))[name]

    assert result.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert "illegal" in result.error_message


@pytest.mark.parametrize(("spec", "code", "message"), [
    (dict(partitions=0), ErrorCode.INVALID_PARTITIONS,
     "Number of partitions was set to an invalid non-positive value."),
    (dict(partitions=-3), ErrorCode.INVALID_PARTITIONS,
     "Number of partitions was set to an invalid non-positive value."),
    (dict(rf=0), ErrorCode.INVALID_REPLICATION_FACTOR,
     "Replication factor was set to an invalid non-positive value."),
    (dict(rf=3), ErrorCode.INVALID_REPLICATION_FACTOR,
     "Unable to replicate the partition 3 time(s): The target replication factor of 3 "
     "cannot be reached because only 1 broker(s) are registered."),
    (dict(retention_ms="soon"), ErrorCode.INVALID_CONFIG,
     "Invalid value soon for configuration retention.ms: Not a number of type LONG"),
    (dict(segment_bytes="9999999999"), ErrorCode.INVALID_CONFIG,
     "Invalid value 9999999999 for configuration segment.bytes: Not a number of type INT"),
    (dict(unclean_leader_election_enable="maybe"), ErrorCode.INVALID_CONFIG,
     "Invalid value maybe for configuration unclean.leader.election.enable: "
     "Expected value to be either true or false"),
    (dict(no_such_config="1"), ErrorCode.INVALID_CONFIG,
     "Unknown topic config name: no.such.config"),
    (dict(retention_ms=None), ErrorCode.INVALID_CONFIG,
     "Null value not supported for topic configs: retention.ms"),
    (dict(assignments=[Assignment(partition_index=0, broker_ids=[1])]), ErrorCode.INVALID_REQUEST,
     "A manual partition assignment was specified, but replication factor was not set to -1."),
])
def test_it_refuses_bad_topic_specs_with_kafkas_messages(
    client: WireClient, spec: dict[str, Any], code: ErrorCode, message: str
) -> None:
    name = new_topic("bad-spec")

    result = create(client, topic(name, **spec))[name]

    assert result.error_code == code
    assert result.error_message.startswith(message)
    assert not exists(client, name)


@pytest.mark.parametrize(("assignments", "message"), [
    ({0: [1], 2: [1]}, "Partitions should be a consecutive sequence starting at 0, "
                       "but got [0, 2]."),
    ({0: [1, 1]}, "The manual partition assignment includes the broker 1 more than once."),
    ({0: [7]}, "The manual partition assignment includes broker 7, but no such broker is "
               "registered."),
    ({0: []}, "The manual partition assignment includes an empty replica list."),
])
def test_it_refuses_bad_manual_assignments(client: WireClient, assignments: dict[int, list[int]],
                                           message: str) -> None:
    name = new_topic("bad-assign")
    spec = topic(name, -1, -1, [Assignment(partition_index=p, broker_ids=b)
                                for p, b in assignments.items()])

    result = create(client, spec)[name]

    assert (result.error_code, result.error_message) == \
        (ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)


def test_it_creates_a_topic_from_a_manual_assignment(client: WireClient) -> None:
    name = new_topic("assigned")
    spec = topic(name, -1, -1, [Assignment(partition_index=p, broker_ids=[1]) for p in (1, 0)])

    result = create(client, spec)[name]

    assert (result.error_code, result.num_partitions, result.replication_factor) == (0, 2, 1)


def test_names_differing_only_in_dot_or_underscore_collide(client: WireClient) -> None:
    name = new_topic("clash") + ".a_b"
    create(client, topic(name))
    other = name.replace(".", "_")

    result = create(client, topic(other))[other]

    assert (result.error_code, result.error_message) == (
        ErrorCode.INVALID_TOPIC_EXCEPTION,
        f"Topic '{other}' collides with existing topics: {name}")


def test_results_follow_the_request_order(client: WireClient) -> None:
    names = [new_topic("order"), "bad name", new_topic("order")]

    results = create(client, *(topic(n) for n in names))

    assert list(results) == names


def test_duplicate_names_in_one_request_are_refused(client: WireClient) -> None:
    name = new_topic("dup")

    results = create(client, topic(name), topic(name))

    assert (results[name].error_code, results[name].error_message) == \
        (ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
    assert not exists(client, name)


def test_validate_only_answers_like_a_creation_and_leaves_no_trace(client: WireClient) -> None:
    name = new_topic("validate")

    result = create(client, topic(name, 4, 1, retention_ms="1000"), validate_only=True)[name]

    assert (result.error_code, result.num_partitions, result.replication_factor) == (0, 4, 1)
    configs = {c.name: (c.value, c.config_source) for c in result.configs}
    assert configs["retention.ms"] == ("1000", 1)  # DYNAMIC_TOPIC_CONFIG
    assert configs["cleanup.policy"] == ("delete", 5)  # DEFAULT_CONFIG
    assert not exists(client, name)
    # ... so creating it for real still works, with the same answer.
    assert create(client, topic(name, 4, 1))[name].error_code == ErrorCode.NONE


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5, 6, 7])
def test_every_create_topics_version_works(client: WireClient, version: int) -> None:
    name = new_topic(f"v{version}")

    result = create(client, topic(name, 2, 1), version=version)[name]

    assert result.error_code == ErrorCode.NONE
    assert exists(client, name)
    if version >= 7:
        assert result.topic_id != uuid.UUID(int=0)


def test_delete_topics_by_id_and_unknown_ids(client: WireClient) -> None:
    name = new_topic("del-id")
    topic_id = create(client, topic(name), version=7)[name].topic_id
    state = DeleteTopicsRequest.DeleteTopicState
    request = DeleteTopicsRequest(timeout_ms=5000, topics=[
        state(name=None, topic_id=topic_id), state(name=None, topic_id=uuid.uuid4())])

    responses = client.request(request, version=6).responses

    assert [(r.name, r.error_code) for r in responses] == \
        [(name, ErrorCode.NONE), (None, ErrorCode.UNKNOWN_TOPIC_ID)]
    assert not exists(client, name)


def test_delete_unknown_topic_by_name(client: WireClient) -> None:
    request = DeleteTopicsRequest(topic_names=["never-created"], timeout_ms=5000)

    [response] = client.request(request, version=5).responses

    assert response.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert response.error_message


def create_partitions(client: WireClient, name: str, count: int,
                      assignments: list[list[int]] | None = None,
                      validate_only: bool = False) -> Any:
    part = CreatePartitionsRequest.CreatePartitionsTopic
    request = CreatePartitionsRequest(
        topics=[part(name=name, count=count, assignments=None if assignments is None else [
            part.CreatePartitionsAssignment(broker_ids=b) for b in assignments])],
        timeout_ms=5000, validate_only=validate_only)
    [result] = client.request(request, version=3).results
    return result


def test_create_partitions_with_manual_assignments(client: WireClient) -> None:
    name = new_topic("grow")
    create(client, topic(name))

    wrong = create_partitions(client, name, 3, [[1]])
    assert (wrong.error_code, wrong.error_message) == (
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.")
    assert create_partitions(client, name, 3, [[1], [1]], validate_only=True).error_code == 0
    assert create_partitions(client, name, 3, [[1], [1]]).error_code == 0
    assert create_partitions(client, name, 3).error_message == "Topic already has 3 partitions."
    unknown = create_partitions(client, new_topic("nope"), 2)
    assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
