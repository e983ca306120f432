"""Durable partition logs: Kafka's segment layout, recovery, retention and compaction."""

from brokercore.log.config import LogConfig
from brokercore.log.errors import (
    CorruptLogError,
    CorruptRecordError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTimestampError,
    InvalidTxnStateError,
    KafkaStorageError,
    LogError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordTooLargeError,
    UnknownProducerIdError,
    UnsupportedMessageFormatError,
)
from brokercore.log.local_log import FetchData
from brokercore.log.partition_log import AppendResult, PartitionLog
from brokercore.log.records import RecordBatchHeader

__all__ = [
    "AppendResult",
    "CorruptLogError",
    "CorruptRecordError",
    "FetchData",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "InvalidTxnStateError",
    "KafkaStorageError",
    "LogConfig",
    "LogError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "PartitionLog",
    "RecordBatchHeader",
    "RecordTooLargeError",
    "UnknownProducerIdError",
    "UnsupportedMessageFormatError",
]
