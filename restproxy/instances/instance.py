"""The consumer-instance manager: REST consumer instances, each owned by one thread.

librdkafka consumers are not thread-safe, so every `ConsumerInstance` runs a worker thread
that alone touches its `Consumer`; requests hand it functions through a queue and wait
for the result. While no request is running, the worker keeps polling a subscribed
consumer so that group rebalances never wait on an idle REST client; what it reads is kept
in `pending` and served by the next fetch. A reaper thread closes instances that stayed
idle longer than `consumer.instance.timeout.ms`.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

import httpauth
from restproxy import errors
from restproxy.client import base_config
from restproxy.content_types import EmbeddedFormat

from . import fetched

logger = logging.getLogger(__name__)
T = TypeVar("T")
IDLE_BUFFER_LIMIT = 2000
_STOP = object()


@dataclass(frozen=True)
class InstanceConfig:
    format: EmbeddedFormat = EmbeddedFormat.BINARY
    auto_offset_reset: str = "latest"
    auto_commit_enable: bool = True
    fetch_min_bytes: int | None = None
    request_timeout_ms: int = 1000

    def consumer_config(self, group: str, name: str) -> dict[str, Any]:
        config: dict[str, Any] = {
            **base_config(), "group.id": group, "client.id": name,
            "auto.offset.reset": self.auto_offset_reset,
            "enable.auto.commit": self.auto_commit_enable,
            # Only records handed to the REST client count as consumed.
            "enable.auto.offset.store": False,
            "enable.partition.eof": False,
            # librdkafka postpones a partition's fetch by this (default 1 s) once it holds
            # queued.min.messages; a client draining a backlog then waits for it (README).
            "fetch.queue.backoff.ms": 20,
        }
        if self.fetch_min_bytes is not None and self.fetch_min_bytes > 0:
            config["fetch.min.bytes"] = self.fetch_min_bytes
        return config


def message_size(message: Message) -> int:
    return len(message.key() or b"") + len(message.value() or b"")


class ConsumerInstance:
    def __init__(self, group: str, name: str, config: InstanceConfig) -> None:
        self.group, self.name, self.config = group, name, config
        # Built here, in the creating request's context: with HTTP auth on, the consumer
        # logs in as that caller (base_config), and only that caller may use the instance.
        self.kafka_config = config.consumer_config(group, name)
        principal = httpauth.current_principal.get()
        self.user = principal.username if principal is not None else None
        self.consumer: Consumer | None = None
        self.pending: deque[Message] = deque()
        self.returned: dict[tuple[str, int], int] = {}
        self.subscribed_topics: list[str] = []
        self.pattern: str | None = None
        self.manual = False
        self.last_used = time.monotonic()
        self.busy = 0
        self.closed = False
        # Bumped whenever `pending` is dropped (seek, assign, subscribe), so records taken
        # before then are never put back by `unread`.
        self.generation = 0
        # An error the idle poll read that a fetch must answer (an ACL refusal, say): the
        # next fetch with no records before it raises it. librdkafka reports such an error
        # once, so dropping it left the client polling empty answers until it gave up.
        self.deferred: errors.RestProxyError | None = None
        self._busy_lock = threading.Lock()
        self._queue_lock = threading.Lock()
        self._finished = False
        self._commands: queue.Queue[Any] = queue.Queue()
        self._ready: Future[None] = Future()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"restproxy-consumer-{group}-{name}")
        self._thread.start()
        self._ready.result(30)

    # --- the owner thread -----------------------------------------------------------------
    def _run(self) -> None:
        try:
            self.consumer = Consumer(self.kafka_config)
        except KafkaException as exc:
            self._ready.set_exception(errors.invalid_consumer_config(str(exc.args[0])))
            return
        self._ready.set_result(None)
        while True:
            try:
                item = self._commands.get(timeout=0.1)
            except queue.Empty:
                self._idle_poll()
                continue
            if item is _STOP:
                break
            function, future = item
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(function(self))
                # As concurrent.futures' own workers: whatever the command raises is the
                # caller's, handed over through its future (never this thread's end).
                except BaseException as exc:  # noqa: BLE001 - re-raised by future.result()
                    future.set_exception(exc)
        with self._queue_lock:
            self._finished = True
        self._fail_queued()
        self._close_consumer()

    def _fail_queued(self) -> None:
        """Requests queued behind the stop learn the instance is gone instead of hanging."""
        while True:
            try:
                item = self._commands.get_nowait()
            except queue.Empty:
                return
            if item is not _STOP and item[1].set_running_or_notify_cancel():
                item[1].set_exception(errors.consumer_instance_not_found(self.group, self.name))

    def _idle_poll(self) -> None:
        if self.consumer is None or self.manual or not (self.subscribed_topics or self.pattern):
            return
        if len(self.pending) >= IDLE_BUFFER_LIMIT:
            return
        try:
            self._read(self.consumer.poll(0))
        except errors.RestProxyError as exc:
            self.deferred = exc

    def _close_consumer(self) -> None:
        if self.consumer is not None:
            try:
                self.consumer.close()
            except (KafkaException, RuntimeError) as exc:
                logger.warning("closing consumer %s/%s: %s", self.group, self.name, exc)

    # --- the request side -----------------------------------------------------------------
    def call(self, function: Callable[[ConsumerInstance], T], timeout: float = 60.0) -> T:
        """Run `function` on the owner thread and return its result."""
        with self.in_use():
            return self.submit(function).result(timeout)

    async def acall(self, function: Callable[[ConsumerInstance], T]) -> T:
        """`call` on the running event loop, holding no thread while the owner works."""
        with self.in_use():
            return await asyncio.wrap_future(self.submit(function))

    def submit(self, function: Callable[[ConsumerInstance], T]) -> Future[T]:
        """Queue `function` for the owner thread; the future settles once it has run."""
        if self.closed:
            raise errors.consumer_instance_not_found(self.group, self.name)
        future: Future[T] = Future()
        with self._queue_lock:
            if self._finished:
                raise errors.consumer_instance_not_found(self.group, self.name)
            self._commands.put((function, future))
        return future

    @contextmanager
    def in_use(self) -> Iterator[None]:
        """The reaper never expires an instance while a request or stream holds it."""
        with self._busy_lock:
            self.busy += 1
            self.last_used = time.monotonic()
        try:
            yield
        finally:
            with self._busy_lock:
                self.busy -= 1
                self.last_used = time.monotonic()

    def stop(self) -> None:
        self.closed = True
        self._commands.put(_STOP)

    def join(self, timeout: float = 10.0) -> None:
        self._thread.join(timeout)

    # --- owner-thread operations (called through `call`) ---------------------------------
    def kafka(self) -> Consumer:
        assert self.consumer is not None
        return self.consumer

    def drop_pending(self, partitions: set[tuple[str, int]] | None = None) -> None:
        self.generation += 1
        if partitions is None:
            self.pending.clear()
            self.deferred = None  # about the old subscription or assignment
            return
        self.pending = deque(m for m in self.pending
                             if (m.topic(), m.partition()) not in partitions)

    def fetch(self, timeout: float, max_bytes: int, fmt: EmbeddedFormat) -> list[dict[str, Any]]:
        """Records for one REST fetch as JSON: whatever is ready, else wait up to `timeout`.

        Decoding happens here, before anything counts as consumed: the fetch ends before a
        record `fmt` cannot present, which stays pending (see `fetched`), and when it is
        the first, the fetch answers its error.
        """
        generation = self.generation
        taken = self.take(timeout, max_bytes)
        shown = fetched.present(taken, fmt)
        delivered = len(shown.bodies)
        self.unread(taken[delivered:], generation)
        self.consumed(taken[:delivered])
        if shown.error is not None and not shown.bodies:
            raise shown.error
        return shown.bodies

    def take(self, timeout: float, max_bytes: int, oversize: bool = True) -> list[Message]:
        """Remove ready records from `pending` without counting them consumed yet.

        A first record larger than `max_bytes` is taken alone when `oversize` allows it;
        otherwise it stays pending.
        """
        deadline = time.monotonic() + timeout
        while not self.pending:
            if self.deferred is not None:
                deferred, self.deferred = self.deferred, None
                raise deferred
            left = deadline - time.monotonic()
            if left <= 0:
                return []
            self._read(self.kafka().poll(min(left, 0.1)))
        # Top up what is ready, never past the idle buffer's size: a client retrying a
        # fetch that stops at an undecodable record must not grow `pending` each time.
        if len(self.pending) < IDLE_BUFFER_LIMIT:
            for message in self.kafka().consume(IDLE_BUFFER_LIMIT - len(self.pending), 0):
                self._read(message)
        return self._take(max_bytes, oversize)

    def _read(self, message: Message | None) -> None:
        if message is None:
            return
        error = message.error()
        if error is None:
            self.pending.append(message)
        elif error.code() != KafkaError._PARTITION_EOF:
            logger.info("consumer %s/%s: %s", self.group, self.name, error.str())
            if (error.fatal() or error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
                    or errors.is_refusal(error)):  # the caller's ACLs: 403, not a wait
                raise errors.from_kafka(error, str(message.topic() or ""))

    def _take(self, max_bytes: int, oversize: bool) -> list[Message]:
        taken: list[Message] = []
        size = 0
        while self.pending:
            message = self.pending[0]
            if (taken or not oversize) and size + message_size(message) > max_bytes:
                break
            size += message_size(self.pending.popleft())
            taken.append(message)
        return taken

    def consumed(self, taken: list[Message]) -> None:
        """Count records as handed to the client: positions for commit, stored offsets."""
        for message in taken:
            self.returned[(message.topic(), message.partition())] = message.offset() + 1
        if taken and self.config.auto_commit_enable:
            self.kafka().store_offsets(offsets=self.fetched_offsets(taken))

    def unread(self, taken: list[Message], generation: int) -> None:
        """Put taken-but-undelivered records back, unless a seek has moved on since."""
        if generation == self.generation:
            self.pending.extendleft(reversed(taken))

    def fetched_offsets(self, messages: list[Message] | None = None) -> list[TopicPartition]:
        if messages is None:
            return [TopicPartition(t, p, o) for (t, p), o in self.returned.items()]
        latest = {(m.topic(), m.partition()): m.offset() + 1 for m in messages}
        return [TopicPartition(t, p, o) for (t, p), o in latest.items()]
