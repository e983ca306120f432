"""Bounded reads of a topic's records and single produces, for message browsers.

    with RecordReader("127.0.0.1:9092") as reader:
        ranges = reader.latest("orders", per_partition=50)    # {partition: (start, stop)}
        records = reader.read("orders", ranges, max_bytes=4 << 20)

The admin API cannot read records, so this is the one place clusterclient consumes: a
confluent-kafka Consumer that only ever `assign`s partitions at explicit offsets. It never
subscribes and never commits, so it joins no consumer group and changes nothing on the
cluster. Every call is bounded by a record count, a byte budget and a deadline: a browser
asks for "the last 50 messages", never "everything".
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

from confluent_kafka import (
    TIMESTAMP_LOG_APPEND_TIME,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from clusterclient.errors import ClusterRequestError, ClusterUnavailable, error_value, translate

# A browser never needs more in one answer; the caller's own limit is usually far smaller.
MAX_RECORDS = 5000


@dataclass(frozen=True)
class ConsumedRecord:
    """One record as the broker stored it: bytes in, bytes out."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None
    timestamp_type: str  # "CreateTime" or "LogAppendTime" (Kafka's names)
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]

    @property
    def size(self) -> int:
        """Key, value and header bytes: what the record costs a consumer."""
        headers = sum(len(k) + len(v or b"") for k, v in self.headers)
        return len(self.key or b"") + len(self.value or b"") + headers


@dataclass(frozen=True)
class ProducedRecord:
    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None


class RecordReader:
    """One short-lived consumer for one browsing request (not thread-safe)."""

    def __init__(self, bootstrap_servers: str, config: Mapping[str, str] | None = None,
                 timeout: float = 5.0) -> None:
        self.timeout = timeout
        self._consumer = Consumer({
            "bootstrap.servers": bootstrap_servers,
            # Required by librdkafka; never used, since nothing subscribes or commits.
            "group.id": f"millrace-reader-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "socket.timeout.ms": int(timeout * 1000),
            "session.timeout.ms": 6000,
            **(config or {}),
        })

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._consumer.close()

    def partitions(self, topic: str) -> list[int]:
        """The topic's partition ids; UNKNOWN_TOPIC_OR_PART if it does not exist."""
        try:
            metadata = self._consumer.list_topics(topic, timeout=self.timeout)
        except KafkaException as exc:
            raise translate(exc, topic) from exc
        described = metadata.topics.get(topic)
        refused = None if described is None else error_value(described.error, topic)
        if described is None or refused is not None:
            raise refused or ClusterRequestError(
                KafkaError.UNKNOWN_TOPIC_OR_PART, "UNKNOWN_TOPIC_OR_PART",
                f"topic {topic} does not exist", topic)
        return sorted(described.partitions)

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        """(log start offset, high watermark) of one partition."""
        try:
            low, high = self._consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=self.timeout, cached=False)
        except KafkaException as exc:
            raise _classify(exc, topic, partition) from exc
        return int(low), int(high)

    def offsets_for_time(self, topic: str, timestamp_ms: int,
                         partitions: list[int]) -> dict[int, int]:
        """Per partition, the first offset whose timestamp is >= timestamp_ms (or the end)."""
        asked = [TopicPartition(topic, p, timestamp_ms) for p in partitions]
        try:
            found = self._consumer.offsets_for_times(asked, timeout=self.timeout)
        except KafkaException as exc:
            raise _classify(exc, topic, None) from exc
        answer = {}
        for tp in found:
            refused = error_value(tp.error, topic, tp.partition)
            if refused is not None:
                raise refused
            answer[tp.partition] = (tp.offset if tp.offset >= 0
                                    else self.watermarks(topic, tp.partition)[1])
        return answer

    def latest(self, topic: str, per_partition: int,
               partitions: list[int] | None = None) -> dict[int, tuple[int, int]]:
        """The ranges holding the newest `per_partition` records of each partition."""
        ranges = {}
        for p in self.partitions(topic) if partitions is None else partitions:
            low, high = self.watermarks(topic, p)
            ranges[p] = (max(low, high - per_partition), high)
        return ranges

    def read(self, topic: str, ranges: Mapping[int, tuple[int, int]], max_records: int = 500,
             max_bytes: int = 4 << 20) -> list[ConsumedRecord]:
        """Records with start <= offset < stop of each partition, in offset order per partition.

        Stops early at max_records or max_bytes in all, or when the deadline passes; offsets a
        compacted or transactional log does not hold are simply absent.
        """
        wanted = {p: (start, stop) for p, (start, stop) in ranges.items() if stop > start}
        if not wanted:
            return []
        max_records = min(max_records, MAX_RECORDS)
        self._consumer.assign([TopicPartition(topic, p, start)
                               for p, (start, _) in wanted.items()])
        try:
            return self._consume(topic, wanted, max_records, max_bytes)
        finally:
            self._consumer.unassign()

    def _consume(self, topic: str, wanted: dict[int, tuple[int, int]], max_records: int,
                 max_bytes: int) -> list[ConsumedRecord]:
        records: list[ConsumedRecord] = []
        open_partitions, budget = set(wanted), max_bytes
        deadline = time.monotonic() + self.timeout
        while open_partitions and len(records) < max_records and budget > 0:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            for message in self._consumer.consume(min(500, max_records - len(records)),
                                                  timeout=min(remaining, 0.5)):
                p = message.partition()
                if p not in open_partitions:
                    continue
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise _classify(error, topic, p)
                    open_partitions.discard(p)
                    continue
                if message.offset() >= wanted[p][1]:
                    open_partitions.discard(p)
                    continue
                record = _record(message)
                records.append(record)
                budget -= record.size
                if message.offset() >= wanted[p][1] - 1:
                    open_partitions.discard(p)
                if budget <= 0 or len(records) >= max_records:
                    break
        return records


class RecordFollower(RecordReader):
    """A reader that stays on one topic and returns its records as they arrive (a live
    tail). Like RecordReader it only assigns and never commits; one thread owns it."""

    def follow(self, topic: str, positions: Mapping[int, int]) -> None:
        """Read each partition from its offset on; replaces what was followed before."""
        self._consumer.assign([TopicPartition(topic, p, o) for p, o in positions.items()])

    def poll(self, max_records: int, timeout: float) -> list[ConsumedRecord]:
        """At most max_records new records, waiting at most timeout for the first.

        librdkafka's own non-fatal errors (a broker that went away, all brokers down for a
        moment) are passed over: it reconnects and resumes by itself. The broker's errors
        (the topic was deleted) and fatal ones raise."""
        records = []
        for message in self._consumer.consume(max_records, timeout=timeout):
            error = message.error()
            if error is None:
                records.append(_record(message))
            elif error.code() != KafkaError._PARTITION_EOF and (error.code() >= 0
                                                                 or error.fatal()):
                raise _classify(error, message.topic() or "", message.partition())
        return records


def produce(bootstrap_servers: str, topic: str, value: bytes | None, key: bytes | None = None,
            headers: list[tuple[str, bytes]] | None = None, partition: int | None = None,
            timeout: float = 10.0, config: Mapping[str, str] | None = None) -> ProducedRecord:
    """Produce one record with acks=all and wait for the broker's answer."""
    producer = Producer({"bootstrap.servers": bootstrap_servers, "acks": "all",
                         "message.timeout.ms": int(timeout * 1000),
                         "socket.timeout.ms": int(timeout * 1000), **(config or {})})
    outcome: dict[str, Any] = {}

    def delivered(error: KafkaError | None, message: Any) -> None:
        outcome["error"], outcome["message"] = error, message

    kwargs: dict[str, Any] = {"value": value, "key": key, "headers": headers or None,
                              "on_delivery": delivered}
    if partition is not None:
        kwargs["partition"] = partition
    try:
        producer.produce(topic, **kwargs)
    except (KafkaException, BufferError) as exc:
        raise _classify(exc, topic, partition) from exc
    producer.flush(timeout + 1.0)
    error, message = outcome.get("error"), outcome.get("message")
    if message is None:
        raise ClusterUnavailable(f"no answer from the cluster within {timeout:g} s")
    if error is not None:
        raise _classify(error, topic, partition)
    kind, stamp = message.timestamp()
    return ProducedRecord(topic, message.partition(), message.offset(),
                          None if kind == TIMESTAMP_NOT_AVAILABLE else stamp)


def _record(message: Any) -> ConsumedRecord:
    kind, stamp = message.timestamp()
    return ConsumedRecord(
        topic=message.topic(), partition=message.partition(), offset=message.offset(),
        timestamp_ms=None if kind == TIMESTAMP_NOT_AVAILABLE else stamp,
        timestamp_type="LogAppendTime" if kind == TIMESTAMP_LOG_APPEND_TIME else "CreateTime",
        key=message.key(), value=message.value(),
        headers=tuple((k, v) for k, v in (message.headers() or [])),
    )


def _classify(exc: BaseException | KafkaError, topic: str,
              partition: int | None) -> ClusterUnavailable | ClusterRequestError:
    """As clusterclient.errors.translate, and a produce that timed out found no broker."""
    error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else exc
    if isinstance(error, KafkaError) and error.code() == KafkaError._MSG_TIMED_OUT:
        return ClusterUnavailable(error.str(), error.code(), error.name())
    if isinstance(exc, BufferError):
        return ClusterUnavailable(str(exc))
    return translate(error, topic, partition)


__all__ = ["MAX_RECORDS", "ConsumedRecord", "ProducedRecord", "RecordFollower",
           "RecordReader", "produce"]
