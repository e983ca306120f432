"""The Kafka client wrapper: the only way the proxy reaches brokers.

One process-wide confluent-kafka Producer (thread-safe; a background thread serves its
delivery callbacks) and one clusterclient.ClusterClient for every metadata and admin read,
both configured from bootstrap servers only, so the proxy works unchanged against the
built-in cluster or any Apache Kafka cluster. clusterclient caches metadata briefly:
produce checks topic and partition on every request, on the event loop while the
cache is fresh (a refresh blocks, so it needs a thread: api.py).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from django.conf import settings

from clusterclient import ClusterClient, TopicMetadata

from . import errors
from .api import need_thread

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


@dataclass(frozen=True)
class DeliveryReport:
    partition: int | None = None
    offset: int | None = None
    timestamp: int | None = None
    error: KafkaError | None = None


NOT_DELIVERED = DeliveryReport()


class PendingBatch:
    """Delivery reports of one request's records, filled in by the producer's callbacks.

    Waited for on an event loop, holding no thread (`until_done`, `all_done`,
    `ready_after`): the callback completing a report that a coroutine waits for wakes its
    loop.
    """

    def __init__(self, count: int) -> None:
        self.reports = [NOT_DELIVERED] * count  # each replaced as its report comes in
        self.done = [False] * count
        self.remaining = count
        self.lock = threading.Lock()
        self._loop_waiters: list[tuple[int, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def callback(self, index: int) -> Callable[[KafkaError | None, Message], None]:
        return partial(self.delivered, index)

    def delivered(self, index: int, err: KafkaError | None, msg: Message) -> None:
        if err is None:
            self.reports[index] = DeliveryReport(msg.partition(), msg.offset(), msg.timestamp()[1])
        else:
            self.reports[index] = DeliveryReport(error=err)
        self.complete(index)

    def fail(self, index: int, error: KafkaError) -> None:
        self.reports[index] = DeliveryReport(error=error)
        self.complete(index)

    def complete(self, index: int) -> None:
        with self.lock:
            self.done[index] = True
            self.remaining -= 1
            if not self._loop_waiters:
                return
            woken = [w for w in self._loop_waiters if self.done[w[0]]]
            if woken:
                self._loop_waiters = [w for w in self._loop_waiters if not self.done[w[0]]]
        for _, loop, future in woken:
            if not loop.is_closed():
                loop.call_soon_threadsafe(_resolve, future)

    async def until_done(self, index: int) -> None:
        """Wait on the running loop until the report at `index` is in."""
        if self.done[index]:  # set once, never cleared: no lock needed to see it set
            return
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        waiter = (index, loop, future)
        with self.lock:
            if self.done[index]:
                return
            self._loop_waiters.append(waiter)
        try:
            await future
        finally:
            with self.lock:
                if waiter in self._loop_waiters:
                    self._loop_waiters.remove(waiter)

    async def all_done(self) -> list[DeliveryReport]:
        index = 0
        while index < len(self.done):
            if self.done[index]:
                index += 1
            else:
                await self.until_done(index)
        return self.reports

    async def ready_after(self, start: int) -> int:
        """Wait for `start`, then return the end of the contiguous run of ready reports."""
        if start < len(self.reports):
            await self.until_done(start)
        end = start
        with self.lock:
            while end < len(self.done) and self.done[end]:
                end += 1
        return end

    def expire(self) -> None:
        """Give up waiting: every report not in yet fails as timed out."""
        for index, done in enumerate(list(self.done)):
            if not done:
                self.fail(index, KafkaError(KafkaError._MSG_TIMED_OUT))

    async def all_done_within(self, seconds: float) -> list[DeliveryReport]:
        try:
            async with asyncio.timeout(seconds):
                return await self.all_done()
        except TimeoutError:
            self.expire()
            return self.reports


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


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

    def produce_one(self, topic: str, record: OutgoingRecord, batch: PendingBatch,
                     index: int) -> None:
        # librdkafka's defaults spelled out: -1 lets the partitioner choose, 0 is now
        partition = -1 if record.partition is None else record.partition
        callback, timestamp = batch.callback(index), record.timestamp or 0
        while True:
            try:
                self.producer.produce(topic, value=record.value, key=record.key,
                                      partition=partition, on_delivery=callback,
                                      timestamp=timestamp, headers=record.headers)
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
    found = _gateway
    if found is not None:  # the hot path: no lock once it exists
        return found
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
    """A topic's metadata; 40401 when it does not exist (refreshed once on a miss).

    Answered on the event loop from clusterclient's cache while it is fresh; a refresh
    blocks, so it asks for a thread first (api.need_thread)."""
    client = cluster()
    cached = client.cached_metadata()
    found = cached.topics.get(name) if cached is not None else None
    if found is None or found.error is not None:
        need_thread()
        return client.topic(name)
    return found


def check_partition(topic_name: str, partition: int) -> None:
    if topic(topic_name).partition(partition) is None:
        raise errors.partition_not_found(partition)


def retriable(error: KafkaError) -> bool:
    return bool(error.retriable())
