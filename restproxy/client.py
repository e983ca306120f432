"""The Kafka client wrapper: the only way the proxy reaches brokers.

One process-wide confluent-kafka Producer (thread-safe; a background thread serves its
delivery callbacks) and one clusterclient.ClusterClient for every metadata and admin read,
both configured from bootstrap servers only, so the proxy works unchanged against the
built-in cluster or any Apache Kafka cluster. clusterclient caches metadata briefly:
produce checks topic and partition on every request.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from django.conf import settings

from clusterclient import ClusterClient, TopicMetadata

from . import errors

METADATA_TTL = 5.0
ADMIN_TIMEOUT = 15.0


def base_config() -> dict[str, Any]:
    return {
        "bootstrap.servers": settings.KAFKA_BOOTSTRAP_SERVERS,
        "client.id": "millrace-restproxy",
    }


@dataclass
class OutgoingRecord:
    """One record to produce; partition None lets the partitioner choose."""

    value: bytes | None
    key: bytes | None = None
    partition: int | None = None
    headers: list[tuple[str, bytes | None]] | None = None
    timestamp: int | None = None


@dataclass
class DeliveryReport:
    partition: int | None = None
    offset: int | None = None
    timestamp: int | None = None
    error: KafkaError | None = None


class PendingBatch:
    """Delivery reports of one request's records, filled in by the producer's callbacks."""

    def __init__(self, count: int) -> None:
        self.reports = [DeliveryReport() for _ in range(count)]
        self.done = [False] * count
        self.remaining = count
        self.waiting_for = -1
        self.cond = threading.Condition()

    def callback(self, index: int) -> Callable[[KafkaError | None, Message], None]:
        def delivered(err: KafkaError | None, msg: Message) -> None:
            report = self.reports[index]
            report.error = err
            if err is None:
                report.partition, report.offset = msg.partition(), msg.offset()
                report.timestamp = msg.timestamp()[1]
            self.complete(index)
        return delivered

    def fail(self, index: int, error: KafkaError) -> None:
        self.reports[index].error = error
        self.complete(index)

    def complete(self, index: int) -> None:
        with self.cond:
            self.done[index] = True
            self.remaining -= 1
            if self.remaining == 0 or index >= self.waiting_for:
                self.cond.notify_all()

    def wait(self, index: int, timeout: float) -> bool:
        """Wait until the report at `index` is in; False on timeout."""
        deadline = time.monotonic() + timeout
        with self.cond:
            self.waiting_for = index
            while not self.done[index]:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
        return True

    def ready_from(self, start: int, timeout: float) -> int:
        """Wait for `start`, then return the end of the contiguous run of ready reports."""
        if start >= len(self.reports):
            return start
        if not self.wait(start, timeout):
            self.fail(start, KafkaError(KafkaError._MSG_TIMED_OUT))
        end = start
        with self.cond:
            while end < len(self.done) and self.done[end]:
                end += 1
        return end

    def wait_all(self, timeout: float) -> list[DeliveryReport]:
        for index in range(len(self.reports)):
            if not self.wait(index, timeout):
                self.fail(index, KafkaError(KafkaError._MSG_TIMED_OUT))
        return self.reports


class KafkaGateway:
    """The shared producer of one proxy process."""

    def __init__(self) -> None:
        self.producer = Producer({
            **base_config(), "linger.ms": 2, "acks": "all", "message.timeout.ms": 30000,
            "queue.buffering.max.messages": 1_000_000,
        })
        self._closed = False
        threading.Thread(target=self._serve_callbacks, name="restproxy-producer",
                         daemon=True).start()

    def _serve_callbacks(self) -> None:
        while not self._closed:
            self.producer.poll(0.05)

    # --- produce ------------------------------------------------------------------------
    def produce(self, topic: str, records: list[OutgoingRecord]) -> PendingBatch:
        """Hand every record to the producer; reports arrive in the returned batch."""
        batch = PendingBatch(len(records))
        for index, record in enumerate(records):
            self.produce_one(topic, record, batch, index)
        return batch

    def produce_and_wait(self, topic: str, records: list[OutgoingRecord],
                         timeout: float = 60.0) -> list[DeliveryReport]:
        return self.produce(topic, records).wait_all(timeout)

    def produce_one(self, topic: str, record: OutgoingRecord, batch: PendingBatch,
                     index: int) -> None:
        kwargs: dict[str, Any] = {"value": record.value, "key": record.key,
                                  "on_delivery": batch.callback(index)}
        if record.partition is not None:
            kwargs["partition"] = record.partition
        if record.headers:
            kwargs["headers"] = record.headers
        if record.timestamp is not None:
            kwargs["timestamp"] = record.timestamp
        while True:
            try:
                self.producer.produce(topic, **kwargs)
                return
            except BufferError:
                self.producer.poll(0.01)
            except KafkaException as exc:
                batch.fail(index, exc.args[0])
                return

    def close(self) -> None:
        self._closed = True
        self.producer.flush(5)


_gateway: KafkaGateway | None = None
_cluster: ClusterClient | None = None
_gateway_lock = threading.Lock()


def gateway() -> KafkaGateway:
    """The process's gateway, created on first use (settings are read then, not at import)."""
    global _gateway
    with _gateway_lock:
        if _gateway is None:
            _gateway = KafkaGateway()
        return _gateway


def cluster() -> ClusterClient:
    """The process's cluster client, created on first use from settings."""
    global _cluster
    with _gateway_lock:
        if _cluster is None:
            _cluster = ClusterClient(settings.KAFKA_BOOTSTRAP_SERVERS, base_config(),
                                     timeout=ADMIN_TIMEOUT, metadata_ttl=METADATA_TTL)
        return _cluster


def reset_gateway() -> None:
    """Drop the producer and the cluster client (tests point the proxy at another cluster)."""
    global _gateway, _cluster
    with _gateway_lock:
        if _gateway is not None:
            _gateway.close()
        _gateway, _cluster = None, None


def topic(name: str) -> TopicMetadata:
    """A topic's metadata; 40401 when it does not exist (refreshed once on a miss)."""
    return cluster().topic(name)


def check_partition(topic_name: str, partition: int) -> None:
    if topic(topic_name).partition(partition) is None:
        raise errors.partition_not_found(partition)


def retriable(error: KafkaError) -> bool:
    return bool(error.retriable())
