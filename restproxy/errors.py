"""The proxy's one error type, an `apierrors.ApiError`, and its translation of other
exceptions for the platform's one exception handler (`apierrors.exception_handler`).

Every failure leaves the proxy as Confluent's body `{"error_code": N, "message": "..."}`.
Constructors are named for the Confluent condition they report; `from_cluster` maps
clusterclient's two exceptions (every metadata and admin read) and `from_kafka` the
producer's and consumers' confluent-kafka errors to the code a REST client expects, by the
same Kafka error code table, so a client mistake never becomes a 500.
"""

from __future__ import annotations

import logging

from confluent_kafka import KafkaError, KafkaException
from django.http import Http404
from rest_framework import exceptions

from apierrors import ApiError
from clusterclient import ClusterRequestError, ClusterUnavailable

logger = logging.getLogger(__name__)


class NeedsThread(Exception):
    """Raised on the event loop by code about to block: run the view on a thread."""


class RestProxyError(ApiError):
    error_code: int  # Confluent's numbers

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(status, error_code, message)


def bad_request(message: str) -> RestProxyError:
    return RestProxyError(400, 400, message)


def kafka_bad_request(message: str) -> RestProxyError:
    return RestProxyError(400, 40002, message)


def not_found(message: str = "HTTP 404 Not Found") -> RestProxyError:
    return RestProxyError(404, 404, message)


def topic_not_found(topic: str = "") -> RestProxyError:
    return RestProxyError(404, 40401, f"Topic {topic} not found.".replace("  ", " "))


def partition_not_found(partition: int | str = "") -> RestProxyError:
    return RestProxyError(404, 40402, f"Partition {partition} not found.".replace("  ", " "))


def consumer_instance_not_found(group: str, instance: str) -> RestProxyError:
    return RestProxyError(
        404, 40403, f"Consumer instance {instance} of group {group} not found."
    )


def group_not_found(group: str) -> RestProxyError:
    return RestProxyError(404, 40405, f"Consumer group {group} not found.")


def cluster_not_found(cluster_id: str) -> RestProxyError:
    return RestProxyError(404, 404, f"Cluster {cluster_id} cannot be found.")


def broker_not_found(broker_id: int | str) -> RestProxyError:
    return RestProxyError(404, 404, f"Broker {broker_id} cannot be found.")


def config_not_found(name: str) -> RestProxyError:
    return RestProxyError(404, 404, f"Config {name} cannot be found.")


def not_acceptable(message: str = "HTTP 406 Not Acceptable") -> RestProxyError:
    return RestProxyError(406, 406, message)


def format_mismatch() -> RestProxyError:
    return RestProxyError(
        406, 40601, "The requested embedded data format does not match the deserializer "
        "for this consumer instance"
    )


def unsupported_media_type(content_type: str) -> RestProxyError:
    return RestProxyError(415, 415, f"HTTP 415 Unsupported Media Type: {content_type!r}")


def schema_registry_failure(message: str) -> RestProxyError:
    return RestProxyError(408, 40801, f"Schema registration or lookup failed: {message}")


def consumer_already_exists(group: str, instance: str) -> RestProxyError:
    return RestProxyError(
        409, 40902, f"Consumer with specified consumer ID {instance} already exists in "
        f"group {group}."
    )


def illegal_state(message: str) -> RestProxyError:
    return RestProxyError(409, 40903, f"Illegal state: {message}")


def topic_already_exists(topic: str) -> RestProxyError:
    return RestProxyError(400, 40002, f"Topic '{topic}' already exists.")


def key_schema_missing() -> RestProxyError:
    return RestProxyError(422, 42201, "Request includes keys but does not include key schema")


def value_schema_missing() -> RestProxyError:
    return RestProxyError(
        422, 42202, "Request includes values but does not include value schema"
    )


def json_conversion(message: str) -> RestProxyError:
    return RestProxyError(422, 42203, f"Conversion of JSON to object failed: {message}")


def invalid_consumer_config(message: str) -> RestProxyError:
    return RestProxyError(422, 42204, message)


def invalid_schema(message: str) -> RestProxyError:
    return RestProxyError(422, 42205, f"Invalid schema: {message}")


def invalid_payload(message: str) -> RestProxyError:
    return RestProxyError(422, 42206, message)


def deserialization_failed(message: str) -> RestProxyError:
    return RestProxyError(422, 42207, f"Error deserializing message. {message}")


def batch_invalid(message: str) -> RestProxyError:
    return RestProxyError(422, 42208, message)


def body_too_large(limit: int) -> RestProxyError:
    return RestProxyError(413, 413, f"Request body is larger than {limit} bytes")


def kafka_error(message: str) -> RestProxyError:
    return RestProxyError(500, 50002, f"Kafka error: {message}")


def kafka_unavailable(message: str) -> RestProxyError:
    return RestProxyError(503, 50302, f"Kafka cluster unavailable: {message}")


def forward_failed(message: str) -> RestProxyError:
    return RestProxyError(503, 50301, f"Owner of the consumer instance unreachable: {message}")


_NOT_FOUND = {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC}
_NO_PARTITION = {KafkaError._UNKNOWN_PARTITION}
_BAD_REQUEST = {
    KafkaError.INVALID_PARTITIONS, KafkaError.INVALID_REPLICATION_FACTOR,
    KafkaError.INVALID_CONFIG, KafkaError.TOPIC_EXCEPTION, KafkaError.INVALID_REQUEST,
    KafkaError.POLICY_VIOLATION, KafkaError.INVALID_REPLICA_ASSIGNMENT,
    KafkaError._INVALID_ARG, KafkaError.INVALID_COMMIT_OFFSET_SIZE,
    KafkaError.MSG_SIZE_TOO_LARGE, KafkaError._MSG_TIMED_OUT,
}
_UNAVAILABLE = {
    KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT,
    KafkaError.BROKER_NOT_AVAILABLE, KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.REQUEST_TIMED_OUT, KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR, KafkaError.NETWORK_EXCEPTION,
}


def from_kafka(exc: KafkaException | KafkaError, topic: str = "") -> RestProxyError:
    error = exc.args[0] if isinstance(exc, KafkaException) else exc
    if not isinstance(error, KafkaError):
        return kafka_error(str(error))
    return _by_code(error.code(), error.str(), topic)


def from_cluster(exc: ClusterRequestError | ClusterUnavailable) -> RestProxyError:
    if isinstance(exc, ClusterUnavailable):
        return kafka_unavailable(exc.message)
    return _by_code(exc.code, exc.message, exc.topic or "")


_FORBIDDEN = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED, KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    KafkaError.DELEGATION_TOKEN_AUTHORIZATION_FAILED,
}
_UNAUTHENTICATED = {KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED}


def is_refusal(error: KafkaError) -> bool:
    """An authorization or authentication failure of the caller (403 / 401)."""
    return error.code() in _FORBIDDEN or error.code() in _UNAUTHENTICATED


def _by_code(code: int, text: str, topic: str) -> RestProxyError:
    # The broker's ACLs refused the caller (the proxy talks to Kafka as them): Confluent's
    # 40301, never a retry until a timeout.
    if code in _FORBIDDEN:
        return RestProxyError(403, 40301, text or "Not authorized")
    if code in _UNAUTHENTICATED:
        return RestProxyError(401, 40101, text or "Authentication failed")
    if code in _NOT_FOUND:
        return topic_not_found(topic)
    if code in _NO_PARTITION:
        return partition_not_found()
    if code == KafkaError.TOPIC_ALREADY_EXISTS:
        return topic_already_exists(topic)
    if code in _BAD_REQUEST:
        return kafka_bad_request(text)
    if code in _UNAVAILABLE:
        return kafka_unavailable(text)
    if code == KafkaError.GROUP_ID_NOT_FOUND:
        return RestProxyError(404, 40405, text)
    if code == KafkaError.NON_EMPTY_GROUP:
        return illegal_state(text)
    return kafka_error(text)


def _translate_drf(exc: exceptions.APIException) -> RestProxyError:
    status = int(exc.status_code)
    detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    if isinstance(exc, exceptions.MethodNotAllowed):
        return RestProxyError(405, 405, "HTTP 405 Method Not Allowed")
    if isinstance(exc, exceptions.NotAcceptable):
        return not_acceptable()
    if isinstance(exc, exceptions.UnsupportedMediaType):
        return RestProxyError(415, 415, "HTTP 415 Unsupported Media Type")
    if isinstance(exc, exceptions.NotFound):
        return not_found()
    return RestProxyError(status, status, detail)


def api_error(exc: Exception) -> RestProxyError | None:
    """The proxy views' `api_error`, which `apierrors.exception_handler` renders."""
    if isinstance(exc, NeedsThread):
        return None  # not an error: api.as_proxy_view runs the view again on a thread
    if isinstance(exc, KafkaException):
        exc = from_kafka(exc)
    elif isinstance(exc, ClusterRequestError | ClusterUnavailable):
        exc = from_cluster(exc)
    elif isinstance(exc, Http404):
        exc = not_found()
    elif isinstance(exc, exceptions.APIException):
        exc = _translate_drf(exc)
    elif not isinstance(exc, RestProxyError):
        logger.error("unexpected error", exc_info=exc)
        exc = RestProxyError(500, 500, "Internal server error")
    assert isinstance(exc, RestProxyError)
    return exc
