"""Errors raised by the partition log, each carrying the Kafka error code a handler reports.

Handlers turn these into per-partition error codes in their responses; only
``CorruptLogError`` (on-disk damage recovery could not repair) and ``KafkaStorageError`` (an
I/O error: the log's dir is failing) are storage faults. ``guard_io`` is how an I/O error
in a log's files becomes the latter.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Concatenate, ParamSpec, Protocol, TypeVar

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


class FailingLog(Protocol):
    """What ``guard_io`` needs of a log: its directory, and how it fails."""

    directory: Path
    failure: str | None  # the I/O error that took the log offline

    def fail(self, error: OSError) -> None: ...


L = TypeVar("L", bound=FailingLog)
P = ParamSpec("P")
R = TypeVar("R")


def guard_io(method: Callable[Concatenate[L, P], R]) -> Callable[Concatenate[L, P], R]:
    """Kafka's maybeHandleIOException: an OSError in the log's files fails the log. This
    call and every later one raise KafkaStorageError, and the log's `fail` (which tells
    the replica manager, which takes the log's whole dir offline) hears of it once."""

    @functools.wraps(method)
    def guarded(self: L, /, *args: P.args, **kwargs: P.kwargs) -> R:
        if self.failure is not None:
            raise KafkaStorageError(f"the log of {self.directory.name} is offline: "
                                    f"{self.failure}")
        try:
            return method(self, *args, **kwargs)
        except OSError as exc:
            self.fail(exc)
            raise KafkaStorageError(f"I/O error in the log of {self.directory.name}: "
                                    f"{exc}") from exc

    return guarded
