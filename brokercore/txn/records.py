"""The records of `__transaction_state`, in Kafka's layout.

A record's key is the transactional id; its value the transaction's whole state after a
transition, so the last value of a key is the state (a null value is a tombstone):

    TransactionLogKey v0     int16 version, transactional_id string
    TransactionLogValue v0   int16 version, producer_id int64, producer_epoch int16,
                             transaction_timeout_ms int32, transaction_status int8,
                             transaction_partitions nullable [topic string, [partition int32]],
                             transaction_last_update_timestamp_ms int64,
                             transaction_start_timestamp_ms int64

Strings are int16-length UTF-8, arrays int32-counted (-1 for null). Records are written as
uncompressed v2 batches without a producer id, one batch per transition, as the group
coordinator writes `__consumer_offsets` (`brokercore.coordinator.records`). A transactional
id's partition is `abs(javaHashCode(transactional_id)) % partitions`, as in Kafka.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from brokercore.coordinator.records import partition_for
from brokercore.topic_partition import TopicPartition

from .state import TxnState

KEY_VERSION = 0
VALUE_VERSION = 0

_HEAD = struct.Struct(">hqhib")  # version, producer id, epoch, timeout, status
_TIMES = struct.Struct(">qq")  # last update, start
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

__all__ = ["TxnRecord", "decode_key", "decode_value", "encode_key", "encode_value",
           "partition_for"]


@dataclass(frozen=True)
class TxnRecord:
    """A transactional id's state, as stored."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition] = field(default_factory=frozenset)
    last_update_ms: int = -1
    start_ms: int = -1


def _str(value: str) -> bytes:
    raw = value.encode()
    return _I16.pack(len(raw)) + raw


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + _str(transactional_id)


def decode_key(key: bytes) -> str | None:
    """The transactional id; None for a key version this broker does not know."""
    (version,) = _I16.unpack_from(key, 0)
    if version != KEY_VERSION:
        return None
    (length,) = _I16.unpack_from(key, 2)
    return key[4 : 4 + length].decode()


def encode_value(record: TxnRecord) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(record.partitions, key=lambda tp: (tp.topic, tp.partition)):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = [_HEAD.pack(VALUE_VERSION, record.producer_id, record.producer_epoch,
                      record.timeout_ms, record.state.code), _I32.pack(len(by_topic))]
    for topic, partitions in by_topic.items():
        out += [_str(topic), _I32.pack(len(partitions)),
                *(_I32.pack(p) for p in partitions)]
    out.append(_TIMES.pack(record.last_update_ms, record.start_ms))
    return b"".join(out)


def decode_value(data: bytes) -> TxnRecord:
    _, producer_id, epoch, timeout_ms, status = _HEAD.unpack_from(data, 0)
    position = _HEAD.size
    (topics,) = _I32.unpack_from(data, position)
    position += 4
    partitions = set()
    for _ in range(max(topics, 0)):
        (length,) = _I16.unpack_from(data, position)
        topic = data[position + 2 : position + 2 + length].decode()
        position += 2 + length
        (count,) = _I32.unpack_from(data, position)
        position += 4
        for _ in range(count):
            partitions.add(TopicPartition(topic, _I32.unpack_from(data, position)[0]))
            position += 4
    last_update, start = _TIMES.unpack_from(data, position)
    return TxnRecord(producer_id, epoch, timeout_ms, TxnState.from_code(status),
                     frozenset(partitions), last_update, start)
