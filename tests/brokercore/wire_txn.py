"""A transactional producer driven request by request over the wire (`WireClient`), for
tests that need what no client library does on its own: a late write after the
transaction ended, a write to a partition never added, requests pipelined at will."""

from __future__ import annotations

import time
from typing import Any

from kafka.protocol.admin import DescribeTransactionsRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import (
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ProduceRequest,
)
from kafka.record.default_records import DefaultRecordBatchBuilder

from brokercore.protocol.errors import ErrorCode
from tests.brokercore.wire import WireClient

Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
TopicData = ProduceRequest.TopicProduceData


def transactional_batch(producer_id: int, epoch: int, sequence: int,
                        values: list[bytes]) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=1,
                                        producer_id=producer_id, producer_epoch=epoch,
                                        base_sequence=sequence, batch_size=2**30)
    for i, value in enumerate(values):
        builder.append(i, timestamp=int(time.time() * 1000), key=None, value=value,
                       headers=[])
    return bytes(builder.build())


def produce_request(transactional_id: str | None, topic: str, partition: int,
                    records: bytes, acks: int = -1) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=transactional_id, acks=acks, timeout_ms=10_000,
        topic_data=[TopicData(name=topic, partition_data=[
            TopicData.PartitionProduceData(index=partition, records=records)])])


class WireTransactions:
    """One transactional id's producer, as a client library drives it: InitProducerId,
    AddPartitionsToTxn, Produce with sequences of its own, EndTxn."""

    def __init__(self, client: WireClient, transactional_id: str) -> None:
        self.client = client
        self.transactional_id = transactional_id
        found = client.request(FindCoordinatorRequest(key=transactional_id, key_type=1), 3)
        assert found.error_code == ErrorCode.NONE  # creates __transaction_state
        self.producer_id, self.epoch = self.init()
        self.sequences: dict[tuple[str, int], int] = {}

    def init(self) -> tuple[int, int]:
        for _ in range(100):
            answer = self.client.request(InitProducerIdRequest(
                transactional_id=self.transactional_id, transaction_timeout_ms=60_000,
                producer_id=-1, producer_epoch=-1), 4)
            if answer.error_code != ErrorCode.CONCURRENT_TRANSACTIONS:
                break
            time.sleep(0.05)
        assert answer.error_code == ErrorCode.NONE, answer
        return answer.producer_id, answer.producer_epoch

    def add(self, topic: str, *partitions: int) -> None:
        for _ in range(100):  # the last transaction's markers may still be going out
            [result] = self.client.request(AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=self.transactional_id,
                v3_and_below_producer_id=self.producer_id,
                v3_and_below_producer_epoch=self.epoch,
                v3_and_below_topics=[Topic(name=topic, partitions=list(partitions))]),
                3).results_by_topic_v3_and_below
            codes = {p.partition_error_code for p in result.results_by_partition}
            if codes != {ErrorCode.CONCURRENT_TRANSACTIONS}:
                break
            time.sleep(0.05)
        assert codes == {ErrorCode.NONE}, codes

    def batch(self, topic: str, partition: int, values: list[bytes]) -> bytes:
        """The next batch of this producer for the partition (its sequence moves on)."""
        sequence = self.sequences.get((topic, partition), 0)
        self.sequences[(topic, partition)] = sequence + len(values)
        return transactional_batch(self.producer_id, self.epoch, sequence, values)

    def produce(self, topic: str, partition: int, values: list[bytes],
                version: int = 10) -> Any:
        """The partition's answer to one Produce of the next batch."""
        request = produce_request(self.transactional_id, topic, partition,
                                  self.batch(topic, partition, values))
        [answer] = self.client.request(request, version).responses
        return answer.partition_responses[0]

    def end(self, commit: bool = True) -> None:
        """EndTxn, then wait until the coordinator has written every marker."""
        answer = self.client.request(EndTxnRequest(
            transactional_id=self.transactional_id, producer_id=self.producer_id,
            producer_epoch=self.epoch, committed=commit), 3)
        assert answer.error_code == ErrorCode.NONE
        for _ in range(200):
            [state] = self.client.request(DescribeTransactionsRequest(
                transactional_ids=[self.transactional_id]), 0).transaction_states
            if state.transaction_state in ("CompleteCommit", "CompleteAbort"):
                return
            time.sleep(0.05)
        raise AssertionError(f"{self.transactional_id} never completed: {state}")
