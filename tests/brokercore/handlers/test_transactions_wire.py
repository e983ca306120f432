"""Transaction requests no client library sends on its own: what a wrong id, epoch or state,
and an old request version, are answered on the wire."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kafka.protocol.admin import (
    DescribeTransactionsRequest,
    ListTransactionsRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import (
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
)

from brokercore.protocol.errors import ErrorCode
from tests.brokercore.wire import WireClient

Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic


@pytest.fixture
def client(kafka_bootstrap: str) -> Iterator[WireClient]:
    with WireClient(kafka_bootstrap) as wire:
        found = wire.request(FindCoordinatorRequest(key="any", key_type=1), 3)
        assert found.error_code == ErrorCode.NONE  # creates __transaction_state
        yield wire


def _init(client: WireClient, transactional_id: str, version: int = 4) -> tuple[int, int]:
    answer = client.request(InitProducerIdRequest(
        transactional_id=transactional_id, transaction_timeout_ms=60_000, producer_id=-1,
        producer_epoch=-1), version)
    assert answer.error_code == ErrorCode.NONE
    return answer.producer_id, answer.producer_epoch


def test_bad_transactional_ids_and_timeouts_get_kafkas_codes(client: WireClient) -> None:
    empty = client.request(InitProducerIdRequest(
        transactional_id="", transaction_timeout_ms=60_000, producer_id=-1,
        producer_epoch=-1), 4)
    too_long = client.request(InitProducerIdRequest(
        transactional_id="t", transaction_timeout_ms=10**9, producer_id=-1,
        producer_epoch=-1), 4)
    unknown = client.request(EndTxnRequest(
        transactional_id=f"never-{uuid.uuid4().hex[:8]}", producer_id=1, producer_epoch=0,
        committed=True), 3)
    assert empty.error_code == ErrorCode.INVALID_REQUEST
    assert too_long.error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert unknown.error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING


def test_a_fenced_epoch_is_producer_fenced_for_new_versions_only(client: WireClient) -> None:
    transactional_id = f"wire-{uuid.uuid4().hex[:8]}"
    pid, epoch = _init(client, transactional_id)
    _init(client, transactional_id)  # a new instance: epoch + 1

    def add(version: int) -> int:
        if version >= 4:
            request = AddPartitionsToTxnRequest(transactions=[
                AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
                    transactional_id=transactional_id, producer_id=pid, producer_epoch=epoch,
                    verify_only=False, topics=[Topic(name="t", partitions=[0])])])
            [result] = client.request(request, version).results_by_transaction
            [topic] = result.topic_results
        else:
            [topic] = client.request(AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=[Topic(name="t", partitions=[0])]),
                version).results_by_topic_v3_and_below
        [partition] = topic.results_by_partition
        return int(partition.partition_error_code)

    assert [add(v) for v in (1, 2, 3, 4)] == [
        ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED,
        ErrorCode.PRODUCER_FENCED, ErrorCode.PRODUCER_FENCED]


def test_ending_a_transaction_that_never_began_is_an_invalid_state(client: WireClient) -> None:
    transactional_id = f"wire-{uuid.uuid4().hex[:8]}"
    pid, epoch = _init(client, transactional_id)
    answer = client.request(EndTxnRequest(transactional_id=transactional_id, producer_id=pid,
                                          producer_epoch=epoch, committed=False), 3)
    assert answer.error_code == ErrorCode.INVALID_TXN_STATE


def test_describe_and_list_answer_unknown_ids_and_states(client: WireClient) -> None:
    transactional_id = f"wire-{uuid.uuid4().hex[:8]}"
    pid, _ = _init(client, transactional_id)
    [missing, known] = client.request(DescribeTransactionsRequest(
        transactional_ids=[f"never-{uuid.uuid4().hex[:8]}", transactional_id]),
        0).transaction_states
    listed = client.request(ListTransactionsRequest(
        state_filters=["Empty", "Bogus"], producer_id_filters=[pid], duration_filter=-1,
        transactional_id_pattern="wire-.*"), 2)
    assert missing.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    assert (known.error_code, known.transaction_state, known.producer_id) == (
        ErrorCode.NONE, "Empty", pid)
    assert listed.unknown_state_filters == ["Bogus"]
    assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == [
        (transactional_id, "Empty")]
