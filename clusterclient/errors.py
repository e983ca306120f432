"""clusterclient's two exceptions, and the one place confluent-kafka errors become them.

`ClusterUnavailable`: the cluster could not be reached or did not answer in time (transport,
timeouts, no broker up). Retry later; pages show a banner. `ClusterRequestError`: the cluster
answered and refused (a Kafka error code: UNKNOWN_TOPIC_OR_PART, INVALID_CONFIG, ...).
"""

from __future__ import annotations

from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

from confluent_kafka import KafkaError, KafkaException

T = TypeVar("T")

# librdkafka's local codes (negative) and Kafka's own that mean "could not get an answer".
_UNAVAILABLE = {
    KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT,
    KafkaError._RESOLVE, KafkaError._DESTROY, KafkaError._WAIT_COORD,
    KafkaError.REQUEST_TIMED_OUT, KafkaError.NETWORK_EXCEPTION,
    KafkaError.BROKER_NOT_AVAILABLE, KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.NOT_COORDINATOR,
}


class ClusterUnavailable(Exception):
    """The cluster did not answer (in time); `code_name` is librdkafka's view when known."""

    def __init__(self, message: str, code: int | None = None, code_name: str | None = None
                 ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.code_name = code_name


class ClusterRequestError(Exception):
    """The cluster refused a request with a Kafka error code.

    `code` is the Kafka error code number (negative for librdkafka's local errors, such as
    _INVALID_ARG), `code_name` its name ("UNKNOWN_TOPIC_OR_PART"), `message` the broker's
    or client's words; `topic` and `partition` say which one when the error is per partition.
    """

    def __init__(self, code: int, code_name: str, message: str, topic: str | None = None,
                 partition: int | None = None, retriable: bool = False) -> None:
        super().__init__(message or code_name)
        self.code = code
        self.code_name = code_name
        self.message = message or code_name
        self.topic = topic
        self.partition = partition
        self.retriable = retriable

    def __repr__(self) -> str:
        where = f" {self.topic}-{self.partition}" if self.partition is not None else (
            f" {self.topic}" if self.topic else "")
        return f"ClusterRequestError({self.code_name}{where}: {self.message})"


def translate(exc: BaseException, topic: str | None = None, partition: int | None = None
              ) -> ClusterUnavailable | ClusterRequestError:
    """The clusterclient exception for a confluent-kafka error (or a KafkaError value)."""
    error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else exc
    if not isinstance(error, KafkaError):
        return ClusterRequestError(KafkaError.UNKNOWN, "UNKNOWN", str(error), topic, partition)
    code, text = error.code(), error.str()
    if code in _UNAVAILABLE:
        return ClusterUnavailable(text, code, error.name())
    return ClusterRequestError(code, error.name(), text, topic, partition,
                               bool(error.retriable()))


def error_value(error: KafkaError | None, topic: str | None = None,
                partition: int | None = None) -> ClusterRequestError | None:
    """A per-partition or per-group error code as a value (None for NO_ERROR)."""
    if error is None or error.code() == KafkaError.NO_ERROR:
        return None
    return ClusterRequestError(error.code(), error.name(), error.str(), topic, partition,
                               bool(error.retriable()))


def result(future: Future[T], timeout: float, topic: str | None = None,
           partition: int | None = None) -> T:
    """Wait for an AdminClient future, translating its failure; never longer than `timeout`."""
    try:
        return future.result(timeout)
    except KafkaException as exc:
        raise translate(exc, topic, partition) from exc
    except FutureTimeout as exc:
        raise ClusterUnavailable(f"no answer within {timeout:.0f}s", KafkaError._TIMED_OUT,
                                 "_TIMED_OUT") from exc
