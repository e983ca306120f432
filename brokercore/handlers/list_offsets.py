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
from brokercore.replication.partition import Partition, PartitionError
from brokercore.security.acls import AclOperation
from brokercore.topic_partition import TopicPartition

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
READ_COMMITTED = 1
EPOCH_FROM = 4  # the version whose partitions carry leader_epoch
# One partition's answer: (error code, timestamp, offset, leader epoch).
Answer = tuple[int, int, int, int]


def _answer(code: ErrorCode, timestamp: int = -1, offset: int = -1, epoch: int = -1) -> Answer:
    return code, timestamp, offset, epoch


@serves(ListOffsetsRequest, ListOffsetsResponse, min_version=1, max_version=10)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    """Partitions are answered as the codec's positional tuples (partition_index,
    error_code, timestamp, offset[, leader_epoch from v4]), which it encodes byte for byte
    as its per-partition objects: building 10,000 of those cost more than encoding them
    (bench/list_offsets_bench.py)."""
    read_committed = ctx.api_version >= 2 and request.isolation_level == READ_COMMITTED
    with_epoch = ctx.api_version >= EPOCH_FROM
    topics = []
    for t in request.topics:
        authorized = broker.authorizer.authorize_topic(ctx, AclOperation.DESCRIBE, t.name)
        partitions = []
        for p in t.partitions:
            code, timestamp, offset, epoch = _offset(broker, t.name, p, request.replica_id,
                                                     read_committed, authorized)
            partitions.append((p.partition_index, code, timestamp, offset, epoch) if with_epoch
                              else (p.partition_index, code, timestamp, offset))
        topics.append((t.name, partitions))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


def _offset(
    broker: BrokerParts, topic: str, p: Any, replica_id: int, read_committed: bool,
    authorized: bool,
) -> Answer:
    if not authorized:  # Kafka: DESCRIBE on the topic
        return _answer(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    try:
        tp = TopicPartition(topic, p.partition_index)
        partition = broker.replicas.leader_partition(tp)
        partition.check_leader_epoch(p.current_leader_epoch)
    except PartitionError as exc:
        return _answer(exc.error_code)
    return _listed(partition, p.timestamp, replica_id, read_committed)


def _listed(partition: Partition, timestamp: int, replica_id: int, read_committed: bool
            ) -> Answer:
    """The answer of the partition's leader for one timestamp (or special offset)."""
    epoch = partition.leader_epoch
    # Clients see up to the high watermark (read_committed ones to the last stable offset);
    # a follower (replica_id >= 0) to the log end.
    client = replica_id < 0
    fetchable = partition.high_watermark if client else partition.log_end_offset
    if client and read_committed:
        fetchable = partition.last_stable_offset
    lagging = client and partition.leader_epoch_start_offset > partition.high_watermark
    if timestamp == LATEST:
        if lagging:
            return _answer(ErrorCode.OFFSET_NOT_AVAILABLE)
        return _answer(ErrorCode.NONE, -1, fetchable, epoch)
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return _answer(ErrorCode.NONE, -1, partition.log_start_offset, epoch)
    if timestamp == LATEST_TIERED:
        return _answer(ErrorCode.NONE, -1, -1, -1)
    if timestamp < 0 and timestamp != MAX_TIMESTAMP:
        return _answer(ErrorCode.INVALID_REQUEST)
    try:
        hit = _by_timestamp(partition, timestamp)
    except KafkaStorageError as exc:  # its log dir just failed
        return _answer(exc.error_code)
    if hit is not None and hit[0] < fetchable:
        return _answer(ErrorCode.NONE, hit[1], max(hit[0], partition.log_start_offset), epoch)
    if lagging:  # the record may be committed, but this leader cannot tell yet
        return _answer(ErrorCode.OFFSET_NOT_AVAILABLE)
    return _answer(ErrorCode.NONE, -1, -1, epoch)


def _by_timestamp(partition: Partition, timestamp: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record at or after `timestamp`, or with
    MAX_TIMESTAMP of the record with the largest timestamp; None if there is none."""
    if timestamp == MAX_TIMESTAMP:
        found = partition.log.max_timestamp()
        return None if found is None else (found[1], found[0])
    return partition.log.offset_for_timestamp(timestamp)
