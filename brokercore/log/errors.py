"""Errors raised by the partition log, each carrying the Kafka error code a handler reports.

Handlers turn these into per-partition error codes in their responses; only
``CorruptLogError`` (on-disk damage recovery could not repair) and ``KafkaStorageError`` (an
I/O error: the log's dir is failing) are storage faults.
"""

from brokercore.protocol.errors import ErrorCode


class LogError(Exception):
    error_code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR


class CorruptRecordError(LogError):
    error_code = ErrorCode.CORRUPT_MESSAGE


class RecordTooLargeError(LogError):
    error_code = ErrorCode.MESSAGE_TOO_LARGE


class InvalidRecordError(LogError):
    error_code = ErrorCode.INVALID_RECORD


class UnsupportedMessageFormatError(LogError):
    error_code = ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT


class OffsetOutOfRangeError(LogError):
    error_code = ErrorCode.OFFSET_OUT_OF_RANGE


class OutOfOrderSequenceError(LogError):
    error_code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(LogError):
    error_code = ErrorCode.INVALID_PRODUCER_EPOCH


class TransactionCoordinatorFencedError(LogError):
    error_code = ErrorCode.TRANSACTION_COORDINATOR_FENCED


class InvalidTxnStateError(LogError):
    """A transactional batch that neither continues its producer's open transaction here nor
    was verified with the transaction coordinator (KIP-890)."""

    error_code = ErrorCode.INVALID_TXN_STATE


class UnknownProducerIdError(LogError):
    error_code = ErrorCode.UNKNOWN_PRODUCER_ID


class InvalidTimestampError(LogError):
    error_code = ErrorCode.INVALID_TIMESTAMP


class CorruptLogError(LogError):
    error_code = ErrorCode.KAFKA_STORAGE_ERROR


class KafkaStorageError(LogError):
    """The log met an I/O error (or did before): its log dir is offline (KIP-112)."""

    error_code = ErrorCode.KAFKA_STORAGE_ERROR
