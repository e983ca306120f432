"""The records of `__consumer_offsets`, in Kafka's layout.

Every record key starts with an int16 key version: 0 or 1 is an offset commit keyed by
(group, topic, partition), 2 is a group's metadata keyed by the group. Values carry their own
int16 version; a null value is a tombstone, which compaction keeps until
`delete.retention.ms` and then drops. Strings are int16-length UTF-8 (-1 for null), bytes
are int32-length. We write, and read back:

    OffsetCommitKey v1      group, topic, partition int32
    OffsetCommitValue v3    offset int64, leader_epoch int32, metadata, commit_timestamp int64
    GroupMetadataKey v2     group
    GroupMetadataValue v3   protocol_type, generation int32, protocol?, leader?,
                            current_state_timestamp int64, members [member_id,
                            group_instance_id?, client_id, client_host, rebalance_timeout int32,
                            session_timeout int32, subscription bytes, assignment bytes]

Records are written as uncompressed v2 batches, one batch per write: without a producer id,
except the offsets of a TxnOffsetCommit, which are a transactional batch of the producer's
id and epoch. They count only once a commit marker (a control batch) of that producer
follows; an abort marker drops them.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from brokercore.topic_partition import TopicPartition

from .consumer_records import CONSUMER_KEYS, ConsumerRecord
from .consumer_records import decode as decode_consumer_record
from .state import OffsetAndMetadata

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def java_string_hash(value: str) -> int:
    """Java's String.hashCode: over UTF-16 code units, with 32-bit overflow."""
    h = 0
    data = value.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's `Utils.abs(groupId.hashCode) % partitions` (abs(MIN_VALUE) is 0 there)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


# -- primitive writers and a reader -------------------------------------------------------
def _str(value: str | None) -> bytes:
    if value is None:
        return _I16.pack(-1)
    raw = value.encode()
    return _I16.pack(len(raw)) + raw


def _bytes(value: bytes) -> bytes:
    return _I32.pack(len(value)) + value


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, fmt: struct.Struct) -> int:
        (value,) = fmt.unpack_from(self.data, self.pos)
        self.pos += fmt.size
        return int(value)

    def i16(self) -> int:
        return self._take(_I16)

    def i32(self) -> int:
        return self._take(_I32)

    def i64(self) -> int:
        return self._take(_I64)

    def nullable_str(self) -> str | None:
        length = self.i16()
        if length < 0:
            return None
        raw = self.data[self.pos : self.pos + length]
        if len(raw) != length:
            raise ValueError("truncated string")
        self.pos += length
        return raw.decode()

    def str(self) -> str:
        return self.nullable_str() or ""

    def bytes(self) -> bytes:
        length = self.i32()
        raw = self.data[self.pos : self.pos + max(length, 0)]
        self.pos += max(length, 0)
        return bytes(raw)


# -- keys and values ----------------------------------------------------------------------
@dataclass(frozen=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupRecord:
    protocol_type: str
    generation_id: int
    protocol_name: str | None
    leader_id: str | None
    state_timestamp_ms: int
    members: tuple[MemberRecord, ...]


def offset_key(group_id: str, tp: TopicPartition) -> bytes:
    return (_I16.pack(OFFSET_KEY_VERSION) + _str(group_id) + _str(tp.topic)
            + _I32.pack(tp.partition))


def offset_value(om: OffsetAndMetadata) -> bytes:
    return (_I16.pack(OFFSET_VALUE_VERSION) + _I64.pack(om.offset) + _I32.pack(om.leader_epoch)
            + _str(om.metadata) + _I64.pack(om.commit_timestamp_ms))


def group_key(group_id: str) -> bytes:
    return _I16.pack(GROUP_KEY_VERSION) + _str(group_id)


def group_value(group: GroupRecord) -> bytes:
    out = [_I16.pack(GROUP_VALUE_VERSION), _str(group.protocol_type),
           _I32.pack(group.generation_id), _str(group.protocol_name), _str(group.leader_id),
           _I64.pack(group.state_timestamp_ms), _I32.pack(len(group.members))]
    for m in group.members:
        out += [_str(m.member_id), _str(m.group_instance_id), _str(m.client_id),
                _str(m.client_host), _I32.pack(m.rebalance_timeout_ms),
                _I32.pack(m.session_timeout_ms), _bytes(m.subscription), _bytes(m.assignment)]
    return b"".join(out)


def decode_offset_value(data: bytes) -> OffsetAndMetadata:
    r = _Reader(data)
    version = r.i16()
    offset = r.i64()
    leader_epoch = r.i32() if version >= 3 else -1
    metadata = r.str()
    commit_timestamp = r.i64()
    return OffsetAndMetadata(offset, leader_epoch, metadata, commit_timestamp)


def decode_group_value(data: bytes) -> GroupRecord:
    r = _Reader(data)
    version = r.i16()
    protocol_type, generation = r.str(), r.i32()
    protocol, leader = r.nullable_str(), r.nullable_str()
    timestamp = r.i64() if version >= 2 else 0
    members = []
    for _ in range(r.i32()):
        member_id = r.str()
        instance = r.nullable_str() if version >= 3 else None
        client_id, client_host = r.str(), r.str()
        rebalance_timeout = r.i32() if version >= 1 else 0
        session_timeout = r.i32()
        members.append(MemberRecord(member_id, instance, client_id, client_host,
                                    rebalance_timeout, session_timeout, r.bytes(), r.bytes()))
    return GroupRecord(protocol_type, generation, protocol, leader, timestamp, tuple(members))


@dataclass(frozen=True)
class OffsetsRecord:
    """One decoded record: an offset commit (tp set), classic group metadata (tp None), or
    a KIP-848 consumer group's record (`consumer` set)."""

    group_id: str
    tp: TopicPartition | None
    offset: OffsetAndMetadata | None = None
    group: GroupRecord | None = None
    consumer: ConsumerRecord | None = None
    producer_id: int = -1  # a transactional offset commit's producer, pending its marker
    producer_epoch: int = -1

    @property
    def is_tombstone(self) -> bool:
        if self.consumer is not None:
            return self.consumer.value is None
        return self.offset is None and self.group is None


@dataclass(frozen=True)
class TxnMarker:
    """A transaction marker in the log: the producer's pending offsets count, or not."""

    producer_id: int
    producer_epoch: int
    commit: bool
    offset: int


def decode_record(
    key: bytes, value: bytes | None, producer: tuple[int, int] = (-1, -1)
) -> OffsetsRecord | None:
    """The record, or None for key versions this broker does not know."""
    r = _Reader(key)
    version = r.i16()
    if version in (0, 1):
        group_id, topic, partition = r.str(), r.str(), r.i32()
        tp = TopicPartition(topic, partition)
        offset = decode_offset_value(value) if value is not None else None
        return OffsetsRecord(group_id, tp, offset=offset, producer_id=producer[0],
                             producer_epoch=producer[1])
    if version == GROUP_KEY_VERSION:
        group_id = r.str()
        group = decode_group_value(value) if value is not None else None
        return OffsetsRecord(group_id, None, group=group)
    if version in CONSUMER_KEYS:
        consumer = decode_consumer_record(version, key, value)
        if consumer is not None:
            return OffsetsRecord(consumer.group_id, None, consumer=consumer)
    return None


# -- batches ------------------------------------------------------------------------------
KeyValue = tuple[bytes, bytes | None]
_CONTROL_KEY = struct.Struct(">hh")  # version, type (0 abort, 1 commit)


class StoredBatch(NamedTuple):
    next_offset: int  # the offset after the batch
    records: list[KeyValue]  # its keyed records; none for a control batch
    producer_id: int  # of a transactional batch or a marker; -1 otherwise
    producer_epoch: int
    commit: bool | None  # a transaction marker: commit or abort; None for data


def build_batch(
    records: list[KeyValue], timestamp_ms: int, producer: tuple[int, int] | None = None
) -> bytes:
    """One uncompressed batch; transactional, of `producer` (id, epoch), if given."""
    producer_id, producer_epoch = producer or (-1, -1)
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=producer is not None,
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=-1,
        batch_size=2**31 - 1,
    )
    for i, (key, value) in enumerate(records):
        builder.append(i, timestamp=timestamp_ms, key=key, value=value, headers=[])
    return bytes(builder.build())


def read_batches(data: bytes) -> Iterator[StoredBatch]:
    """Every batch of a record set: its keyed records, or the transaction marker it is."""
    records = MemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        if batch is None:
            break
        producer_id = batch.producer_id if batch.is_transactional else -1
        epoch = batch.producer_epoch if batch.is_transactional else -1
        if batch.is_control_batch:
            keys = [bytes(r.key) for r in batch if r.key is not None]
            kind = _CONTROL_KEY.unpack_from(keys[0])[1] if keys else -1
            yield StoredBatch(batch.next_offset, [], producer_id, epoch,
                              {0: False, 1: True}.get(kind))
            continue
        yield StoredBatch(batch.next_offset, [
            (bytes(r.key), None if r.value is None else bytes(r.value))
            for r in batch if r.key is not None
        ], producer_id, epoch, None)


def subscription_topics(metadata: bytes) -> set[str]:
    """The topics of a ConsumerProtocolSubscription (version int16, then [topic])."""
    r = _Reader(metadata)
    r.i16()
    count = r.i32()
    if count < 0 or count > len(metadata):
        raise ValueError("bad subscription")
    return {r.str() for _ in range(count)}
