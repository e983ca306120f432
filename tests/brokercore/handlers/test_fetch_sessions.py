"""Fetch sessions (KIP-227) and Fetch v12-v17 on the wire: what a session's fetcher sends and
gets back, including the requests no well-behaved client sends."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest

from brokercore.protocol.errors import ErrorCode
from tests.brokercore.wire import WireClient, record_batch
from tests.compat.clients import new_topic

FetchTopic = FetchRequest.FetchTopic
FetchPartition = FetchTopic.FetchPartition
Forgotten = FetchRequest.ForgottenTopic
PARTITIONS = 3


@pytest.fixture
def topic(client: WireClient) -> str:
    return client.create_topic(new_topic("sessions"), PARTITIONS)


def produce(client: WireClient, topic: str, index: int, values: list[bytes]) -> None:
    data = ProduceRequest.TopicProduceData
    response = client.request(ProduceRequest(
        transactional_id=None, acks=1, timeout_ms=5000,
        topic_data=[data(name=topic, partition_data=[data.PartitionProduceData(
            index=index, records=record_batch(values))])]), version=8)
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE


def topic_id(client: WireClient, topic: str) -> uuid.UUID:
    response = client.request(MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
        allow_auto_topic_creation=False), version=12)
    return response.topics[0].topic_id  # type: ignore[no-any-return]


def part(index: int, offset: int = 0, last_fetched_epoch: int = -1) -> Any:
    return FetchPartition(partition=index, current_leader_epoch=-1, fetch_offset=offset,
                          last_fetched_epoch=last_fetched_epoch, log_start_offset=-1,
                          partition_max_bytes=2**20)


def fetch(client: WireClient, session_id: int, epoch: int, topics: list[Any],
          forgotten: list[Any] | None = None, version: int = 12) -> Any:
    return client.request(FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=2**20, isolation_level=0,
        session_id=session_id, session_epoch=epoch, topics=topics,
        forgotten_topics_data=forgotten or [], rack_id=""), version=version)


def answered(response: Any) -> dict[int, Any]:
    return {p.partition_index: p for t in response.responses for p in t.partitions}


def open_session(client: WireClient, topic: str) -> int:
    response = fetch(client, 0, 0, [FetchTopic(topic=topic, partitions=[
        part(i) for i in range(PARTITIONS)])])
    assert response.error_code == ErrorCode.NONE
    assert response.session_id > 0
    assert sorted(answered(response)) == list(range(PARTITIONS))
    return int(response.session_id)


def test_an_incremental_fetch_answers_only_the_partitions_that_changed(
    client: WireClient, topic: str,
) -> None:
    session = open_session(client, topic)

    idle = fetch(client, session, 1, [])
    assert (idle.error_code, idle.session_id, answered(idle)) == (ErrorCode.NONE, session, {})

    produce(client, topic, 1, [b"a", b"b"])
    changed = answered(fetch(client, session, 2, []))
    assert list(changed) == [1]
    assert changed[1].high_watermark == 2 and changed[1].records

    # The client moves its position past what it read: sent as an update, nothing is new.
    moved = fetch(client, session, 3, [FetchTopic(topic=topic, partitions=[part(1, offset=2)])])
    assert answered(moved) == {}
    produce(client, topic, 1, [b"c"])
    produce(client, topic, 2, [b"d"])
    again = answered(fetch(client, session, 4, []))
    assert sorted(again) == [1, 2]
    assert again[1].high_watermark == 3


def test_forgotten_partitions_leave_the_session(client: WireClient, topic: str) -> None:
    session = open_session(client, topic)
    forget = fetch(client, session, 1, [], forgotten=[Forgotten(topic=topic, partitions=[0])])
    assert answered(forget) == {}
    produce(client, topic, 0, [b"unseen"])
    produce(client, topic, 2, [b"seen"])
    assert list(answered(fetch(client, session, 2, []))) == [2]


def test_wrong_epochs_and_unknown_sessions_get_session_errors(
    client: WireClient, topic: str,
) -> None:
    session = open_session(client, topic)
    skipped = fetch(client, session, 2, [])
    assert (skipped.error_code, skipped.session_id, skipped.responses) == (
        ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0, [])
    assert fetch(client, session, 1, []).error_code == ErrorCode.NONE
    assert fetch(client, session, 1, []).error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    unknown = fetch(client, session + 1 if session < 2**31 - 1 else 1, 1, [])
    assert unknown.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    # A full fetch naming the session closes it, and epoch -1 opens none.
    closed = fetch(client, session, -1, [FetchTopic(topic=topic, partitions=[part(0)])])
    assert (closed.error_code, closed.session_id, sorted(answered(closed))) == (
        ErrorCode.NONE, 0, [0])
    assert fetch(client, session, 2, []).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_v13_fetches_by_topic_id_and_refuses_unknown_ids(client: WireClient, topic: str) -> None:
    produce(client, topic, 0, [b"x", b"y"])
    known = topic_id(client, topic)
    missing = uuid.uuid4()
    response = fetch(client, 0, -1, [FetchTopic(topic_id=known, partitions=[part(0)]),
                                     FetchTopic(topic_id=missing, partitions=[part(0)])],
                     version=17)
    by_id = {t.topic_id: t.partitions[0] for t in response.responses}
    assert by_id[known].error_code == ErrorCode.NONE and by_id[known].high_watermark == 2
    assert by_id[known].records
    assert by_id[missing].error_code == ErrorCode.UNKNOWN_TOPIC_ID


def test_a_session_keeps_to_topic_ids_or_to_names(client: WireClient, topic: str) -> None:
    opened = fetch(client, 0, 0, [FetchTopic(topic_id=topic_id(client, topic),
                                             partitions=[part(0)])], version=16)
    assert opened.session_id > 0
    by_name = fetch(client, opened.session_id, 1, [], version=12)
    assert by_name.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    produce(client, topic, 0, [b"z"])
    by_id = fetch(client, opened.session_id, 1, [], version=16)
    assert [p.high_watermark for t in by_id.responses for p in t.partitions] == [1]


def test_a_fetcher_past_its_epochs_end_is_told_where_it_diverges(
    client: WireClient, topic: str,
) -> None:
    produce(client, topic, 0, [b"a", b"b", b"c"])
    # A fetcher that holds epoch-0 records up to offset 5 has a tail this leader never had.
    ahead = fetch(client, 0, -1, [FetchTopic(topic=topic, partitions=[
        part(0, offset=5, last_fetched_epoch=0)])])
    [diverged] = answered(ahead).values()
    assert diverged.error_code == ErrorCode.NONE and not diverged.records
    assert (diverged.diverging_epoch.epoch, diverged.diverging_epoch.end_offset) == (0, 3)
    agreeing = fetch(client, 0, -1, [FetchTopic(topic=topic, partitions=[
        part(0, offset=1, last_fetched_epoch=0)])])
    [fine] = answered(agreeing).values()
    assert fine.diverging_epoch is None and fine.records
    # An epoch this leader has never had cannot be placed: the fetcher must reset.
    unknown = fetch(client, 0, -1, [FetchTopic(topic=topic, partitions=[
        part(0, offset=1, last_fetched_epoch=7)])])
    [lost] = answered(unknown).values()
    assert lost.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and lost.diverging_epoch is None
