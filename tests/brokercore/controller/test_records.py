"""Metadata records survive their JSON form, read old logs, and refuse what they can't read."""

from __future__ import annotations

import json

import pytest

from brokercore.controller.image import MetadataImage
from brokercore.controller.records import (
    RECORD_TYPES,
    AccessControlEntryRecord,
    BrokerRecord,
    ClusterRecord,
    ConfigRecord,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RecordError,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UserScramCredentialRecord,
    from_json,
    to_json,
)

EXAMPLES: list[MetadataRecord] = [
    ClusterRecord("c1"),
    BrokerRecord(1, "h", 9092, "rack-a", fenced=True, epoch=3, incarnation="i"),
    BrokerRecord(2, "h", 9093, endpoints=(("CLIENT", "h", 9092), ("INTERNAL", "h", 9093))),
    FenceBrokerRecord(1, False),
    TopicRecord("t", "tid"),
    PartitionRecord("tid", 0, (1, 2), (1,), 1, 4, 2, (2,), ()),
    PartitionChangeRecord("tid", 0, isr=(1, 2)),
    PartitionChangeRecord("tid", 0, leader=-1, leader_epoch=5),
    RemoveTopicRecord("tid", "t"),
    ProducerIdsRecord(2000),
    ConfigRecord("topic", "t", "retention.ms", None),
    AccessControlEntryRecord("aid", 2, "t", 3, "User:alice", "*", 3, 3),
    RemoveAccessControlEntryRecord("aid"),
    UserScramCredentialRecord("alice", 2, "c2FsdA==", "c3RvcmVk", "c2VydmVy", 4096),
    RemoveUserScramCredentialRecord("alice", 1),
]


def test_every_record_type_has_an_example() -> None:
    assert {type(r) for r in EXAMPLES} == set(RECORD_TYPES.values())


@pytest.mark.parametrize("record", EXAMPLES, ids=lambda r: type(r).__name__)
def test_a_record_reads_back_from_its_json_line(record: MetadataRecord) -> None:
    line = json.dumps(to_json(record))
    assert from_json(json.loads(line)) == record


def test_a_partition_change_leaves_out_what_does_not_change() -> None:
    assert to_json(PartitionChangeRecord("tid", 3, isr=(1,))) == {
        "type": "partition_change", "version": 0, "topic_id": "tid", "partition": 3,
        "isr": [1]}


def test_records_written_before_versions_read_as_version_0() -> None:
    old = {"type": "broker", "node_id": 2, "host": "h", "port": 1, "fenced": False}
    assert from_json(old) == BrokerRecord(2, "h", 1)


@pytest.mark.parametrize("raw", [
    {"type": "no_such_record"},
    {"type": "topic", "version": 1, "name": "t", "topic_id": "x"},
    {"type": "topic", "name": "t"},
])
def test_it_refuses_records_it_cannot_read(raw: dict[str, object]) -> None:
    with pytest.raises(RecordError):
        from_json(raw)


def test_a_partition_change_bumps_the_partition_epoch_and_keeps_the_rest() -> None:
    image = MetadataImage()
    written: list[MetadataRecord] = [TopicRecord("t", "tid"),
                                     PartitionRecord("tid", 0, (1, 2), (1, 2), 1)]
    for offset, record in enumerate(written):
        image.apply(record, offset)
    image.apply(PartitionChangeRecord("tid", 0, isr=(1,)), 2)
    part = image.topics["t"].partitions[0]
    assert (part.isr, part.replicas, part.leader, part.partition_epoch) == ([1], [1, 2], 1, 1)


def test_group_configs_are_applied_and_carried_by_a_snapshot() -> None:
    image = MetadataImage()
    image.apply(ConfigRecord("group", "g", "consumer.session.timeout.ms", "50000"), 0)
    image.apply(ConfigRecord("group", "h", "consumer.heartbeat.interval.ms", "6000"), 1)
    image.apply(ConfigRecord("group", "h", "consumer.heartbeat.interval.ms", None), 2)
    assert image.group_configs == {"g": {"consumer.session.timeout.ms": "50000"}}
    restored = MetadataImage()
    restored.load(image.records(), 2)
    assert restored.group_configs == image.group_configs


def test_scram_credentials_and_endpoints_survive_a_snapshot() -> None:
    image = MetadataImage()
    records: list[MetadataRecord] = [
            BrokerRecord(2, "h", 9093, endpoints=(("CLIENT", "h", 9092),)),
            UserScramCredentialRecord("alice", 1, "c2FsdA==", "c3RvcmVk", "c2VydmVy", 4096),
            UserScramCredentialRecord("alice", 2, "c2FsdA==", "c3RvcmVk", "c2VydmVy", 8192),
            RemoveUserScramCredentialRecord("alice", 1)]
    for offset, record in enumerate(records):
        image.apply(record, offset)
    copy = MetadataImage()
    copy.load([from_json(to_json(r)) for r in image.records()], 3)
    assert copy.scram_credentials == image.scram_credentials
    assert list(copy.scram_credentials["alice"]) == [2]
    assert copy.brokers[2].endpoint("CLIENT") == ("h", 9092)
    assert copy.brokers[2].endpoint("OTHER") is None
