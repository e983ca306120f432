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
import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from django.conf import settings

import httpauth
from clusterclient import (
    AcksAllShortfall,
    ClusterClient,
    ClusterRequestError,
    ClusterUnavailable,
    TopicMetadata,
)

from . import errors
from .api import need_thread, selected

METADATA_TTL = 5.0
ADMIN_TIMEOUT = 15.0
# How often a loop with requests waiting for delivery reports polls the producer when the
# last poll found none, and how long the gateway's thread waits in a poll (or sleeps while
# loops poll).
DRAIN_INTERVAL = 0.001
THREAD_POLL_INTERVAL = 0.05
# The fewest records of a request whose reports its loop drains itself: a request of a
# few records waits on the thread's callbacks, which wake the loop at once (side by side,
# one-record v3 produce used 1.26x the CPU and a third more time per request when its
# loop polled, while a 1,000-record stream used 0.56x: bench/README.md).
LOOP_DRAIN_MIN_RECORDS = 10


# librdkafka keys that say who a client is: the proxy's own login on a cluster, replaced by
# the caller's (`as_caller`)
_SASL_LOGIN = ("sasl.username", "sasl.password", "sasl.jaas.config", "sasl.mechanism",
               "sasl.mechanisms", "sasl.oauthbearer.config", "sasl.oauthbearer.method",
               "sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret")
_CLIENT_CERTIFICATE = ("ssl.certificate.location", "ssl.certificate.pem",
                       "ssl.key.location", "ssl.key.pem", "ssl.keystore.location")


def base_config() -> dict[str, Any]:
    """The Kafka config of the proxy's clients: as the caller when HTTP auth gave one
    (`httpauth.current_principal`; SASL with their credentials), else the proxy's own (with
    a secured cluster's login from KAFKA_CLIENT_CONFIG: platform --secure). Another
    configured cluster (a v3 path's) gets its own config, and its own login replaced by the
    caller's when there is one (`as_caller`)."""
    chosen = selected.get()
    principal = httpauth.current_principal.get()
    if chosen is not None:
        config = chosen.client_config(**{"client.id": "millrace-restproxy"})
        return config if principal is None else as_caller(chosen.name, config, principal)
    config = {
        **settings.KAFKA_CLIENT_CONFIG,
        "bootstrap.servers": settings.KAFKA_BOOTSTRAP_SERVERS,
        "client.id": "millrace-restproxy",
    }
    if principal is not None:
        config.update(httpauth.principal_config(principal))
    return config


@contextmanager
def as_proxy() -> Iterator[None]:
    """The proxy's own identity inside the block, whoever called: finding the other
    clusters' ids (a caller without a login on one must not make it look down to all)."""
    token = httpauth.current_principal.set(None)
    try:
        yield
    finally:
        httpauth.current_principal.reset(token)


def as_caller(name: str, config: dict[str, Any], principal: httpauth.Principal
              ) -> dict[str, Any]:  # fmt: skip
    """Another cluster's client config logging in as the caller: its own transport keys
    (security.protocol, the CA it trusts) with the caller's SASL login, in the mechanism
    HTTP users log in with (MILLRACE_HTTP_AUTH_SASL_MECHANISM), so that cluster's ACLs
    decide for the caller as the default's do. A cluster without SASL cannot tell callers
    apart: without a client certificate everyone reaches it as ANONYMOUS, so the proxy's
    config is everyone's; with one (mTLS) the proxy's certificate would lend the caller the
    proxy's rights, so the request is refused (403 40301)."""
    protocol = str(config.get("security.protocol", "PLAINTEXT")).upper()
    if protocol.startswith("SASL_"):
        config = {k: v for k, v in config.items() if k not in _SASL_LOGIN}
        return {**config, "sasl.mechanisms": settings.MILLRACE_HTTP_AUTH_SASL_MECHANISM,
                "sasl.username": principal.username, "sasl.password": principal.password}
    if any(key in config for key in _CLIENT_CERTIFICATE):
        raise errors.RestProxyError(
            403, 40301, f"Cluster {name} identifies clients by certificate, not by login: "
                        "the proxy cannot reach it as the caller")
    return config


@dataclass
class OutgoingRecord:
    """One record to produce; partition None lets the partitioner choose."""

    value: bytes | None
    key: bytes | None = None
    partition: int | None = None
    headers: list[tuple[str, bytes | None]] | None = None
    timestamp: int | None = None


class DeliveryReport(NamedTuple):
    # A tuple, not a dataclass: one is built per record, in the delivery callback.
    partition: int | None = None
    offset: int | None = None
    timestamp: int | None = None
    error: KafkaError | None = None


NOT_DELIVERED = DeliveryReport()


class PendingBatch:
    """Delivery reports of one request's records, filled in by the producer's callbacks.

    Waited for on an event loop, holding no thread (`until_done`, `all_done`,
    `ready_after`): while a coroutine waits for a batch of LOOP_DRAIN_MIN_RECORDS or more,
    its loop polls the producer (`KafkaGateway.draining`), so the callbacks run on the loop
    between requests rather than on the gateway's thread, which takes the GIL from the
    loop once per report. A callback completing a report that a coroutine of another loop
    waits for wakes that loop.
    """

    def __init__(self, count: int, gateway: KafkaGateway | None = None) -> None:
        self.reports = [NOT_DELIVERED] * count  # each replaced as its report comes in
        self.done = [False] * count
        self.remaining = count
        self.gateway = gateway  # None: nothing to poll (every report is filled in by hand)
        self.lock = threading.Lock()
        self._loop_waiters: list[tuple[int, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def extend(self, count: int) -> int:
        """Room for `count` more reports (a stream's records as they arrive); the first's
        index."""
        with self.lock:
            first = len(self.reports)
            self.reports += [NOT_DELIVERED] * count
            self.done += [False] * count
            self.remaining += count
        return first

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
        here = _running_loop()
        for _, loop, future in woken:
            if loop is here:  # drained on the waiter's own loop: no wake-up needed
                _resolve(future)
            elif not loop.is_closed():
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
            if self.gateway is None or len(self.done) < LOOP_DRAIN_MIN_RECORDS:
                await future
            else:
                with self.gateway.draining(loop):
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


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # the gateway's thread
        return None


class KafkaGateway:
    """The shared producer of one proxy process.

    Delivery reports of large requests are served where they are awaited: each event loop
    with such a request waiting polls the producer (`draining`), and the gateway's thread
    polls only while no loop does (small requests, reports nobody waits for). Served on
    the thread, each report's Python callback takes the GIL from the busy loop, and waits
    up to the switch interval for it (bench/README.md, "Delivery reports on the loop").
    """

    def __init__(self) -> None:
        self.producer = Producer({
            **base_config(), "linger.ms": 2, "acks": "all", "message.timeout.ms": 30000,
            "queue.buffering.max.messages": 1_000_000,
        })
        self._closed = False
        self._waiting: dict[asyncio.AbstractEventLoop, int] = {}  # waiters on each loop
        self._drainers: dict[asyncio.AbstractEventLoop, asyncio.Task[None]] = {}
        self._no_drainers = threading.Event()
        threading.Thread(target=self._serve_callbacks, name="restproxy-producer",
                         daemon=True).start()

    def _serve_callbacks(self) -> None:
        while not self._closed:
            if self._drainers:
                # Set when the last loop stops polling; the timeout only guards a race
                # between loops of several threads (tests).
                self._no_drainers.wait(THREAD_POLL_INTERVAL)
            else:
                self.producer.poll(THREAD_POLL_INTERVAL)

    @contextmanager
    def draining(self, loop: asyncio.AbstractEventLoop) -> Iterator[None]:
        """Poll the producer on `loop` (the running one) while the block waits."""
        self._waiting[loop] = self._waiting.get(loop, 0) + 1
        if loop not in self._drainers:
            self._no_drainers.clear()
            self._drainers[loop] = loop.create_task(self._drain(loop))
        try:
            yield
        finally:
            self._waiting[loop] -= 1
            if not self._waiting[loop] and loop not in self._drainers:
                del self._waiting[loop]

    async def _drain(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            while self._waiting.get(loop):
                # Reports come in runs: while they flow, poll again on the loop's next turn.
                served = self.producer.poll(0)
                await asyncio.sleep(0 if served else DRAIN_INTERVAL)
        finally:
            # Reports that come in after the last waiter left go to the thread.
            del self._drainers[loop]
            if not self._waiting.get(loop):
                self._waiting.pop(loop, None)
            if not self._drainers:
                self._no_drainers.set()

    # --- produce ------------------------------------------------------------------------
    def produce(self, topic: str, records: list[OutgoingRecord]) -> PendingBatch:
        """Hand every record to the producer; reports arrive in the returned batch."""
        batch = PendingBatch(len(records), self)
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
        self._no_drainers.set()
        self.producer.flush(5)


_gateway: KafkaGateway | None = None
_cluster: ClusterClient | None = None
_gateway_lock = threading.Lock()


def gateway() -> KafkaGateway:
    """The process's gateway, created on first use (settings are read then, not at import);
    the caller's own when the request has a principal (`PrincipalClients`)."""
    global _gateway
    principal = httpauth.current_principal.get()
    if principal is not None:
        return principal_clients.get(principal, _selected_name()).gateway()
    if selected.get() is not None:
        return _other().gateway()
    found = _gateway
    if found is not None:  # the hot path: no lock once it exists
        return found
    with _gateway_lock:
        if _gateway is None:
            _gateway = KafkaGateway()
        return _gateway


def cluster() -> ClusterClient:
    """The process's cluster client, created on first use from settings; the caller's own
    when the request has a principal."""
    global _cluster
    principal = httpauth.current_principal.get()
    if principal is not None:
        return principal_clients.get(principal, _selected_name()).cluster()
    if selected.get() is not None:
        return _other().cluster()
    with _gateway_lock:
        if _cluster is None:
            _cluster = _new_cluster()
        return _cluster


# The clients of the other configured clusters, by name (made on first use, like the default's)
_others: dict[str, CallerClients] = {}


def _selected_name() -> str | None:
    chosen = selected.get()
    return None if chosen is None else chosen.name


def _other() -> CallerClients:
    chosen = selected.get()
    assert chosen is not None
    found = _others.get(chosen.name)
    if found is None:
        with _gateway_lock:
            found = _others.setdefault(chosen.name, CallerClients())
    return found


def _new_cluster() -> ClusterClient:
    config = base_config()
    return ClusterClient(config["bootstrap.servers"], config, timeout=ADMIN_TIMEOUT,
                         metadata_ttl=METADATA_TTL)


class CallerClients:
    """One principal's producer (a `KafkaGateway`) and cluster client, made on first use
    while that principal's request is being served, so they log in as the caller."""

    def __init__(self) -> None:
        self.used = time.monotonic()
        self._gateway: KafkaGateway | None = None
        self._cluster: ClusterClient | None = None
        self._lock = threading.Lock()

    def gateway(self) -> KafkaGateway:
        self.used = time.monotonic()
        if self._gateway is None:
            with self._lock:
                if self._gateway is None:
                    self._gateway = KafkaGateway()
        return self._gateway

    def cluster(self) -> ClusterClient:
        self.used = time.monotonic()
        if self._cluster is None:
            with self._lock:
                if self._cluster is None:
                    self._cluster = _new_cluster()
        return self._cluster

    def close(self) -> None:
        if self._gateway is not None:
            self._gateway.close()


class PrincipalClients:
    """The pool of callers' clients, by user, password and cluster (a v3 path's; None for
    the default: a password change gets new clients; the old ones expire), each closed once idle for
    RESTPROXY_PRINCIPAL_CLIENT_IDLE_S. Expiry is checked as the pool is used, at most
    every few seconds, and the closing (a flush) runs on a thread of its own."""

    SWEEP_S = 5.0

    def __init__(self) -> None:
        self._clients: dict[bytes, CallerClients] = {}
        self._lock = threading.Lock()
        self._swept = time.monotonic()

    @staticmethod
    def _key(principal: httpauth.Principal, cluster: str | None) -> bytes:
        return hashlib.sha256(
            f"{principal.username}\0{principal.password}\0{cluster or ''}".encode()).digest()

    def get(self, principal: httpauth.Principal, cluster: str | None = None) -> CallerClients:
        key = self._key(principal, cluster)
        found = self._clients.get(key)
        if found is None:
            with self._lock:
                found = self._clients.setdefault(key, CallerClients())
        if time.monotonic() - self._swept > self.SWEEP_S:
            self.expire()
        return found

    def expire(self, idle_s: float | None = None, wait: bool = False) -> None:
        idle = settings.RESTPROXY_PRINCIPAL_CLIENT_IDLE_S if idle_s is None else idle_s
        now = time.monotonic()
        with self._lock:
            self._swept = now
            gone = [key for key, clients in self._clients.items() if now - clients.used > idle]
            closing = [self._clients.pop(key) for key in gone]
        if closing and wait:
            _close_all(closing)
        elif closing:
            threading.Thread(target=_close_all, args=(closing,), name="restproxy-caller-close",
                             daemon=True).start()

    def __len__(self) -> int:
        return len(self._clients)


def _close_all(closing: list[CallerClients]) -> None:
    for clients in closing:
        clients.close()


principal_clients = PrincipalClients()


def reset_gateway() -> None:
    """Drop the producer and the cluster client (tests point the proxy at another cluster)."""
    global _gateway, _cluster
    with _gateway_lock:
        if _gateway is not None:
            _gateway.close()
        _gateway, _cluster = None, None
        _shortfalls.clear()
        others = list(_others.values())
        _others.clear()
    _close_all(others)
    principal_clients.expire(idle_s=-1, wait=True)


# (cluster, topic) -> (until when it is trusted, its shortfall); kept as long as metadata is
_shortfalls: dict[tuple[str | None, str], tuple[float, AcksAllShortfall | None]] = {}


def acks_all_shortfall(name: str) -> AcksAllShortfall | None:
    """Whether `name` has fewer replicas than its min.insync.replicas. The proxy produces
    with acks=all, and the broker refuses every such write with NOT_ENOUGH_REPLICAS, which
    the producer retries until its 30 s timeout: the proxy answers at once instead.

    Cached for as long as metadata (a topic's replicas or min.insync.replicas rarely
    change); a miss reads the topic's configs, so on the event loop it asks for a thread."""
    chosen = selected.get()
    key = (None if chosen is None else chosen.name, name)
    cached = _shortfalls.get(key)
    if cached is not None and cached[0] > time.monotonic():
        return cached[1]
    need_thread()
    try:
        found = cluster().acks_all_shortfall(name)
    except (ClusterRequestError, ClusterUnavailable):
        found = None  # the produce itself will say what is wrong
    _shortfalls[key] = (time.monotonic() + METADATA_TTL, found)
    return found


def topic(name: str) -> TopicMetadata:
    """A topic's metadata; 40401 when it does not exist (refreshed once on a miss).

    Answered on the event loop from clusterclient's cache while it is fresh; a refresh
    blocks, so it asks for a thread first (api.need_thread)."""
    client = cluster()
    cached = client.cached_metadata()
    found = cached.topics.get(name) if cached is not None else None
    if found is None or found.error is not None:
        need_thread()
        try:
            return client.topic(name)
        except ClusterRequestError as exc:
            if exc.code == KafkaError.UNKNOWN_TOPIC_OR_PART and httpauth.current_principal.get():
                _check_described(client, name)
            raise
    return found


def _check_described(client: ClusterClient, name: str) -> None:
    """A topic missing from a caller's metadata may be one their ACLs hide: asked for by
    name, Kafka answers TOPIC_AUTHORIZATION_FAILED for it, which is 403 40301 (Confluent's
    answer), not 40401."""
    try:
        named = client.admin.list_topics(topic=name, timeout=ADMIN_TIMEOUT).topics.get(name)
    except KafkaException:
        return
    error = named.error if named is not None else None
    if error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
        raise errors.from_kafka(error, name)


def check_partition(topic_name: str, partition: int) -> None:
    if topic(topic_name).partition(partition) is None:
        raise errors.partition_not_found(partition)


def retriable(error: KafkaError) -> bool:
    return bool(error.retriable())
