"""Fetch (1): whole batches from the log, long-polling for min_bytes up to max_wait_ms.

Consumers (replica_id -1) read below the high watermark; a fetch offset between the high
watermark and the log end is answered empty. A follower (replica_id >= 0) reads up to the
log end, and its fetch offset is its log end, which the leader records (ISR, high
watermark). Both only from the leader. A read_committed consumer (isolation_level 1) reads
below the last stable offset and gets the aborted transactions of what it read, from the
log's transaction indexes. No fetch sessions (KIP-227): session_id 0 tells
clients to send full requests.
"""

import time
from dataclasses import dataclass
from typing import Any

from kafka.protocol.consumer import FetchRequest, FetchResponse

from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.log import LogError
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.replication.partition import Partition, PartitionError
from brokercore.topic_partition import TopicPartition

TopicData = FetchResponse.FetchableTopicResponse
PartitionData = TopicData.PartitionData
AbortedTransaction = PartitionData.AbortedTransaction
READ_COMMITTED = 1


@dataclass
class _Read:
    topic: str
    index: int
    partition: Partition | None
    error: ErrorCode
    records: Any = b""
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted: Any = None  # read_committed: the aborted transactions in what was read


@serves(FetchRequest, FetchResponse, min_version=4, max_version=12)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    deadline = time.monotonic() + max(request.max_wait_ms, 0) / 1000
    if request.replica_id >= 0:
        _record_follower_fetch(broker, request)
    reads = _read_all(broker, ctx, request)
    partitions = [r.partition for r in reads if r.partition is not None]
    while (
        sum(len(r.records or b"") for r in reads) < request.min_bytes
        and partitions
        and not any(r.error for r in reads)
        and (remaining := deadline - time.monotonic()) > 0
    ):
        await broker.replicas.wait_for_data(partitions, remaining)
        reads = _read_all(broker, ctx, request)
    topics: dict[str, list[Any]] = {}
    for r in reads:
        if r.partition is not None and request.replica_id < 0:
            r.partition.bytes_out += len(r.records or b"")
        topics.setdefault(r.topic, []).append(PartitionData(
            partition_index=r.index, error_code=r.error, high_watermark=r.high_watermark,
            last_stable_offset=r.last_stable_offset, log_start_offset=r.log_start_offset,
            aborted_transactions=r.aborted,
            preferred_read_replica=-1, records=r.records,
        ))
    return FetchResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=0,
        responses=[TopicData(topic=name, partitions=parts) for name, parts in topics.items()],
    )


def _record_follower_fetch(broker: BrokerParts, request: Any) -> None:
    """Once per request, not per long-poll round: the fetch offset is the follower's log end."""
    manager = broker.replicas
    for topic in request.topics:
        for p in topic.partitions:
            partition = manager.partitions.get(TopicPartition(topic.topic, p.partition))
            if (
                partition is not None and partition.is_leader
                and p.current_leader_epoch in (-1, partition.leader_epoch)
                and 0 <= p.fetch_offset <= partition.log_end_offset
            ):
                manager.record_follower_fetch(partition, request.replica_id, p.fetch_offset,
                                              p.log_start_offset)


def _read_all(broker: BrokerParts, ctx: RequestContext, request: Any) -> list[_Read]:
    budget = request.max_bytes if request.max_bytes > 0 else 2**31 - 1
    reads: list[_Read] = []
    for topic in request.topics:
        for p in topic.partitions:
            # KIP-74: the first batch returned may exceed max_bytes, so consumers progress.
            nothing_yet = not any(r.records for r in reads)
            read = _read(broker, topic.topic, p, budget, first=nothing_yet,
                         replica_id=request.replica_id,
                         read_committed=request.isolation_level == READ_COMMITTED)
            budget -= len(read.records or b"")
            reads.append(read)
    return reads


def _read(
    broker: BrokerParts, topic: str, p: Any, budget: int, first: bool, replica_id: int,
    read_committed: bool,
) -> _Read:
    follower = replica_id >= 0
    tp = TopicPartition(topic, p.partition)
    try:
        partition = broker.replicas.leader_partition(tp)
        partition.check_leader_epoch(p.current_leader_epoch)
        if follower and replica_id not in partition.followers:
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    except PartitionError as exc:
        return _Read(topic, p.partition, None, exc.error_code)
    stable = partition.last_stable_offset
    result = _Read(topic, p.partition, partition, ErrorCode.NONE,
                   high_watermark=partition.high_watermark, last_stable_offset=stable,
                   log_start_offset=partition.log_start_offset, aborted=[])
    max_bytes = min(p.partition_max_bytes, budget)
    if max_bytes <= 0 and not first:
        return result
    # read_committed stops at the last stable offset, and learns which transactions aborted.
    limit = stable if read_committed else partition.high_watermark
    try:
        data = partition.log.read(
            p.fetch_offset, max(max_bytes, 0),
            max_offset=None if follower else limit, min_one_batch=first,
        )
    except LogError as exc:
        result.error = exc.error_code
        result.aborted = None
        return result
    result.records = data.records
    if read_committed and data.records:
        result.aborted = [AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
                          for a in partition.log.aborted_transactions(p.fetch_offset, stable)]
    return result
