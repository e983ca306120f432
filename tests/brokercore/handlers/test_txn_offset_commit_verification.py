"""TxnOffsetCommit verified with the transaction coordinator (KIP-890 part 1), as Kafka 4.0's
group coordinator verifies it, on the wire: offsets of a transaction that does not include
the group's partition are refused and never count."""

from __future__ import annotations

import time
import uuid

from kafka.protocol.consumer import OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import AddOffsetsToTxnRequest, TxnOffsetCommitRequest

from brokercore.protocol.errors import ErrorCode
from tests.brokercore.wire import WireClient
from tests.brokercore.wire_txn import WireTransactions
from tests.compat.clients import new_topic

Topic = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
Partition = Topic.TxnOffsetCommitRequestPartition


def _id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _add_offsets(client: WireClient, producer: WireTransactions, group: str) -> None:
    for _ in range(100):  # the last transaction's markers may still be going out
        answer = client.request(AddOffsetsToTxnRequest(
            transactional_id=producer.transactional_id, producer_id=producer.producer_id,
            producer_epoch=producer.epoch, group_id=group), 3)
        if answer.error_code != ErrorCode.CONCURRENT_TRANSACTIONS:
            break
        time.sleep(0.05)
    assert answer.error_code == ErrorCode.NONE


def _txn_commit(client: WireClient, producer: WireTransactions, group: str, topic: str,
                offset: int) -> ErrorCode:
    answer = client.request(TxnOffsetCommitRequest(
        transactional_id=producer.transactional_id, group_id=group,
        producer_id=producer.producer_id, producer_epoch=producer.epoch,
        generation_id=-1, member_id="", group_instance_id=None,
        topics=[Topic(name=topic, partitions=[Partition(
            partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
            committed_metadata="")])]), 3)
    return ErrorCode(answer.topics[0].partitions[0].error_code)


def _committed(client: WireClient, group: str, topic: str) -> int:
    answer = client.request(OffsetFetchRequest(group_id=group, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])]), 5)
    return int(answer.topics[0].partitions[0].committed_offset)


def _group(client: WireClient) -> str:
    group = _id("txn-group")
    assert client.request(FindCoordinatorRequest(key=group, key_type=0), 3).error_code == 0
    return group


def test_offsets_of_a_transaction_that_never_added_the_group_are_refused(
    client: WireClient,
) -> None:
    topic = client.create_topic(new_topic("txn-offsets"), 1)
    group = _group(client)
    producer = WireTransactions(client, _id("no-add-offsets"))
    producer.add(topic, 0)
    assert _txn_commit(client, producer, group, topic, 5) == ErrorCode.INVALID_TXN_STATE
    producer.end(commit=True)
    assert _committed(client, group, topic) == -1


def test_a_zombies_offsets_after_its_transaction_committed_are_refused(
    client: WireClient,
) -> None:
    topic = client.create_topic(new_topic("txn-offsets"), 1)
    group = _group(client)
    producer = WireTransactions(client, _id("zombie-offsets"))
    _add_offsets(client, producer, group)
    assert _txn_commit(client, producer, group, topic, 7) == ErrorCode.NONE
    producer.end(commit=True)
    assert _committed(client, group, topic) == 7
    # The same producer's commit, delayed past its transaction's marker: no transaction of
    # its is open on the group's partition now, and the coordinator does not vouch for one.
    assert _txn_commit(client, producer, group, topic, 9) == ErrorCode.INVALID_TXN_STATE
    assert _committed(client, group, topic) == 7
