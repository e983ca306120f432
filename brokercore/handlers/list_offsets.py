"""ListOffsets (2): earliest (-2), latest (-1), max timestamp (-3) or first at a timestamp.

v8's earliest local offset (-4) is the log start offset, and v9's latest tiered offset (-5)
is -1, as on a Kafka broker without tiered storage: every segment is local. v10's
`timeout_ms` bounds remote-storage reads, which never happen here.

Latest is the high watermark: clients never learn of offsets that are not committed yet.
With isolation_level 1 (read_committed, v2+) it is the last stable offset, and timestamp
lookups find only offsets below it, as Kafka answers.
A leader elected moments ago may still hold a high watermark below the start of its own
epoch (the old leader's may have been higher); until its followers report, it answers a
client's latest or timestamp lookup with OFFSET_NOT_AVAILABLE, a retriable error, rather
than an offset below one a client may already have seen (Kafka's KIP-207).
"""

from typing import Any

from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse

from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.log import KafkaStorageError
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.replication.partition import PartitionError
from brokercore.security.acls import AclOperation
from brokercore.topic_partition import TopicPartition

TopicResponse = ListOffsetsResponse.ListOffsetsTopicResponse
PartitionResponse = TopicResponse.ListOffsetsPartitionResponse

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
READ_COMMITTED = 1


@serves(ListOffsetsRequest, ListOffsetsResponse, min_version=1, max_version=10)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    return ListOffsetsResponse(
        throttle_time_ms=0,
        topics=[
            TopicResponse(name=t.name, partitions=[
                _offset(broker, t.name, p, request.replica_id,
                        ctx.api_version >= 2 and request.isolation_level == READ_COMMITTED,
                        broker.authorizer.authorize_topic(ctx, AclOperation.DESCRIBE, t.name))
                for p in t.partitions])
            for t in request.topics
        ],
    )


def _offset(
    broker: BrokerParts, topic: str, p: Any, replica_id: int, read_committed: bool,
    authorized: bool,
) -> Any:
    def answer(code: ErrorCode, timestamp: int = -1, offset: int = -1, epoch: int = -1) -> Any:
        return PartitionResponse(partition_index=p.partition_index, error_code=code,
                                 old_style_offsets=[], timestamp=timestamp, offset=offset,
                                 leader_epoch=epoch)

    if not authorized:  # Kafka: DESCRIBE on the topic
        return answer(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    try:
        tp = TopicPartition(topic, p.partition_index)
        partition = broker.replicas.leader_partition(tp)
        partition.check_leader_epoch(p.current_leader_epoch)
    except PartitionError as exc:
        return answer(exc.error_code)
    epoch = partition.leader_epoch
    # Clients see up to the high watermark (read_committed ones to the last stable offset);
    # a follower (replica_id >= 0) to the log end.
    client = replica_id < 0
    fetchable = partition.high_watermark if client else partition.log_end_offset
    if client and read_committed:
        fetchable = partition.last_stable_offset
    lagging = client and partition.leader_epoch_start_offset > partition.high_watermark
    if p.timestamp == LATEST:
        if lagging:
            return answer(ErrorCode.OFFSET_NOT_AVAILABLE)
        return answer(ErrorCode.NONE, -1, fetchable, epoch)
    if p.timestamp in (EARLIEST, EARLIEST_LOCAL):
        return answer(ErrorCode.NONE, -1, partition.log_start_offset, epoch)
    if p.timestamp == LATEST_TIERED:
        return answer(ErrorCode.NONE, -1, -1, -1)
    if p.timestamp < 0 and p.timestamp != MAX_TIMESTAMP:
        return answer(ErrorCode.INVALID_REQUEST)
    try:
        if p.timestamp == MAX_TIMESTAMP:
            # (offset, timestamp) of the record with the largest timestamp
            found = partition.log.max_timestamp()
            hit = None if found is None else (found[1], found[0])
        else:
            hit = partition.log.offset_for_timestamp(p.timestamp)
    except KafkaStorageError as exc:  # its log dir just failed
        return answer(exc.error_code)
    if hit is not None and hit[0] < fetchable:
        return answer(ErrorCode.NONE, hit[1], max(hit[0], partition.log_start_offset), epoch)
    if lagging:  # the record may be committed, but this leader cannot tell yet
        return answer(ErrorCode.OFFSET_NOT_AVAILABLE)
    return answer(ErrorCode.NONE, -1, -1, epoch)
