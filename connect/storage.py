"""The worker's three compacted internal topics, each read whole into memory and then
followed (Kafka's KafkaBasedLog and its backing stores).

On disk (in Kafka, JSON without schemas, the formats Apache Kafka's workers write):
- config topic (1 partition): `connector-<name>` -> {"properties": {...}};
  `task-<name>-<n>` -> {"properties": {...}}; `commit-<name>` -> {"tasks": N} makes the
  task configs before it current; `target-state-<name>` -> {"state": "STARTED" | "PAUSED",
  "state.v2": "STARTED" | "PAUSED" | "STOPPED"}; a tombstone deletes.
- offset topic: `["<connector>", {partition}]` -> {offset}; a tombstone forgets it.
- status topic: `status-connector-<name>`, `status-task-<name>-<n>` -> {"state", "trace",
  "worker_id", "generation"}; `status-topic-<topic>:connector-<name>` -> {"topic": {...}}.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

log = logging.getLogger(__name__)

Record = tuple[bytes, bytes | None]  # key, value (None: tombstone)


def partition_key(partition: Mapping[str, Any]) -> str:
    """The one canonical form of a source partition, used as a dictionary key."""
    return json.dumps(partition, sort_keys=True, separators=(",", ":"))


def dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


# What a partition answers until its new leadership has reached the broker asked.
_NOT_READY = frozenset({KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                        KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.NOT_ENOUGH_REPLICAS})

class TopicLog:
    """One compacted topic: a reader thread applies every record to `apply`, in order, from
    the beginning; `read_to_end()` waits until it has applied everything committed now."""

    def __init__(self, settings: Mapping[str, str], topic: str,
                 apply: Callable[[bytes, bytes | None], None]) -> None:
        self.settings, self.topic, self.apply = dict(settings), topic, apply
        self.admin = AdminClient(self.settings)
        self.producer = Producer({**self.settings, "acks": "all", "enable.idempotence": True,
                                  "partitioner": "murmur2_random", "linger.ms": 0})
        self._consumer: Consumer | None = None
        self._positions: dict[int, int] = {}
        self._cond = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=f"log-{topic}", daemon=True)

    def ensure_topic(self, partitions: int, replication: int, timeout: float = 30) -> None:
        """Create the topic compacted if missing (what the worker does on its first start)."""
        topic = NewTopic(self.topic, num_partitions=partitions, replication_factor=replication,
                         config={"cleanup.policy": "compact"})
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.admin.create_topics([topic])[self.topic].result(timeout)
                return
            except KafkaException as exc:
                code = exc.args[0].code()
                if code == KafkaError.TOPIC_ALREADY_EXISTS:
                    return
                if time.monotonic() > deadline or not exc.args[0].retriable():
                    raise
                time.sleep(0.5)

    def partitions(self, timeout: float = 30) -> list[int]:
        meta = self.admin.list_topics(self.topic, timeout=timeout).topics[self.topic]
        if meta.error is not None:
            raise KafkaException(meta.error)
        return sorted(meta.partitions)

    def start(self) -> None:
        parts = self.partitions()
        self._consumer = Consumer({**self.settings, "group.id": f"connect-log-{self.topic}",
                                   "enable.auto.commit": False,
                                   "isolation.level": "read_committed",
                                   "fetch.wait.max.ms": 50})
        self._consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in parts])
        self._positions = {p: 0 for p in parts}
        self._thread.start()
        self.read_to_end()

    def _run(self) -> None:
        assert self._consumer is not None
        while not self._stopping:
            # consume() waits for all 500 or the timeout: the timeout bounds how late a
            # write is seen (read_to_end, config changes)
            batch = self._consumer.consume(500, 0.05)
            for msg in batch:
                if msg.error() is None:
                    self.apply(msg.key() or b"", msg.value())
            positions = self._consumer.position(
                [TopicPartition(self.topic, p) for p in self._positions])
            with self._cond:
                for tp in positions:
                    if tp.offset >= 0:
                        self._positions[tp.partition] = tp.offset
                self._cond.notify_all()
        self._consumer.close()

    def end_offsets(self, timeout: float = 30) -> dict[int, int]:
        """The last stable offset of each partition (what a read_committed reader reaches).
        A topic just created may not have its leaders everywhere yet: NOT_LEADER and its
        kin are asked again until `timeout`."""
        query = {TopicPartition(self.topic, p): OffsetSpec.latest() for p in self._positions}
        deadline = time.monotonic() + timeout
        while True:
            futures = self.admin.list_offsets(
                query, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=timeout)
            try:
                return {tp.partition: f.result(timeout).offset for tp, f in futures.items()}
            except KafkaException as exc:
                error = exc.args[0]
                transient = error.retriable() or error.code() in _NOT_READY
                if not transient or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def read_to_end(self, timeout: float = 30) -> None:
        ends = self.end_offsets(timeout)
        deadline = time.monotonic() + timeout
        with self._cond:
            while any(self._positions.get(p, 0) < end for p, end in ends.items()):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{self.topic}: not read to its end in {timeout}s")
                self._cond.wait(min(left, 0.2))

    def send(self, key: bytes, value: bytes | None, timeout: float = 30) -> None:
        """Write one record and wait until the cluster has it."""
        errors: list[KafkaError] = []

        def delivered(err: KafkaError | None, _msg: Any) -> None:
            if err is not None:
                errors.append(err)
        self.producer.produce(self.topic, key=key, value=value, on_delivery=delivered)
        if self.producer.flush(timeout) > 0:
            raise TimeoutError(f"{self.topic}: write not acknowledged in {timeout}s")
        if errors:
            raise KafkaException(errors[0])

    def stop(self) -> None:
        self._stopping = True
        if self._thread.is_alive():
            self._thread.join(5)
        self.producer.flush(5)


@dataclass
class ConfigState:
    """The config topic as read so far: connectors, their committed task configs, and
    their target states."""
    connectors: dict[str, dict[str, str]] = field(default_factory=dict)
    tasks: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    target_states: dict[str, str] = field(default_factory=dict)
    pending: dict[tuple[str, int], dict[str, str]] = field(default_factory=dict)
    offset: int = 0

    def all_tasks(self) -> list[tuple[str, int]]:
        return [(name, i) for name in self.connectors
                for i in range(len(self.tasks.get(name, [])))]

    def copy(self) -> ConfigState:
        return ConfigState(dict(self.connectors), {k: list(v) for k, v in self.tasks.items()},
                           dict(self.target_states), dict(self.pending), self.offset)


class ConfigStore:
    def __init__(self, settings: Mapping[str, str], topic: str,
                 on_change: Callable[[str, str, Any], None]) -> None:
        self.state = ConfigState()
        self.lock = threading.Lock()
        self.on_change = on_change
        self.log = TopicLog(settings, topic, self._apply)

    def _apply(self, key: bytes, value: bytes | None) -> None:
        text = key.decode()
        data = json.loads(value) if value else None
        if text.startswith("restart-connector-"):
            # a restart request (KIP-745): each worker restarts what it runs of it
            self.on_change("restart", text[len("restart-connector-"):], data)
            return
        with self.lock:
            self.state.offset += 1
            name = self._apply_locked(text, data)
        if name is not None:
            self.on_change("config", name, data)

    def _apply_locked(self, key: str, data: Any) -> str | None:
        state = self.state
        if key.startswith("connector-"):
            name = key[len("connector-"):]
            if data is None:
                state.connectors.pop(name, None)
                state.tasks.pop(name, None)
                state.target_states.pop(name, None)
            else:
                state.connectors[name] = data["properties"]
            return name
        if key.startswith("task-") and data is not None:
            name, _, index = key[len("task-"):].rpartition("-")
            state.pending[(name, int(index))] = data["properties"]
            return None
        if key.startswith("commit-") and data is not None:
            name = key[len("commit-"):]
            count = int(data["tasks"])
            state.tasks[name] = [state.pending.get((name, i), {}) for i in range(count)]
            return name
        if key.startswith("target-state-"):
            name = key[len("target-state-"):]
            if data is None:
                state.target_states.pop(name, None)
            else:
                state.target_states[name] = data.get("state.v2") or data["state"]
            return name
        return None

    def snapshot(self) -> ConfigState:
        with self.lock:
            return self.state.copy()

    def put_connector(self, name: str, config: Mapping[str, str]) -> None:
        self.log.send(f"connector-{name}".encode(), dumps({"properties": dict(config)}))

    def put_target_state(self, name: str, state: str) -> None:
        v1 = "PAUSED" if state == "STOPPED" else state
        self.log.send(f"target-state-{name}".encode(), dumps({"state": v1, "state.v2": state}))

    def put_tasks(self, name: str, configs: list[dict[str, str]]) -> None:
        for i, config in enumerate(configs):
            self.log.send(f"task-{name}-{i}".encode(), dumps({"properties": config}))
        self.log.send(f"commit-{name}".encode(), dumps({"tasks": len(configs)}))

    def put_restart(self, name: str, include_tasks: bool, only_failed: bool) -> None:
        self.log.send(f"restart-connector-{name}".encode(),
                      dumps({"include-tasks": include_tasks, "only-failed": only_failed}))

    def remove_connector(self, name: str) -> None:
        self.log.send(f"connector-{name}".encode(), None)
        self.log.send(f"target-state-{name}".encode(), None)


class OffsetStore:
    def __init__(self, settings: Mapping[str, str], topic: str) -> None:
        self.offsets: dict[str, dict[str, Any]] = {}  # connector -> partition key -> offset
        self.lock = threading.Lock()
        self.log = TopicLog(settings, topic, self._apply)

    def _apply(self, key: bytes, value: bytes | None) -> None:
        try:
            connector, partition = json.loads(key)
        except (ValueError, TypeError):
            log.warning("offsets topic: ignoring a key not in Connect's form: %r", key)
            return
        with self.lock:
            mine = self.offsets.setdefault(connector, {})
            if value is None:
                mine.pop(partition_key(partition), None)
            else:
                mine[partition_key(partition)] = json.loads(value)

    def of(self, connector: str) -> dict[str, Any]:
        with self.lock:
            return dict(self.offsets.get(connector, {}))

    @staticmethod
    def record_key(connector: str, partition: Mapping[str, Any]) -> bytes:
        return dumps([connector, dict(partition)])


@dataclass(frozen=True)
class Status:
    state: str
    trace: str | None
    worker_id: str
    generation: int


class StatusStore:
    def __init__(self, settings: Mapping[str, str], topic: str) -> None:
        self.connectors: dict[str, Status] = {}
        self.tasks: dict[tuple[str, int], Status] = {}
        self.topics: dict[str, set[str]] = {}
        self.lock = threading.Lock()
        self.log = TopicLog(settings, topic, self._apply)

    def _apply(self, key: bytes, value: bytes | None) -> None:
        text = key.decode()
        data = json.loads(value) if value else None
        with self.lock:
            if text.startswith("status-connector-"):
                self._put(self.connectors, text[len("status-connector-"):], data)
            elif text.startswith("status-task-"):
                name, _, index = text[len("status-task-"):].rpartition("-")
                self._put(self.tasks, (name, int(index)), data)
            elif text.startswith("status-topic-"):
                topic, _, connector = text[len("status-topic-"):].partition(":connector-")
                used = self.topics.setdefault(connector, set())
                (used.add if data is not None else used.discard)(topic)

    @staticmethod
    def _put(table: dict[Any, Status], key: Any, data: Any) -> None:
        if data is None:
            table.pop(key, None)
        else:
            table[key] = Status(data["state"], data.get("trace"), data["worker_id"],
                                int(data.get("generation", 0)))

    def put(self, key: str, status: Status) -> None:
        self.log.producer.produce(self.log.topic, key=key.encode(), value=dumps({
            "state": status.state, "trace": status.trace, "worker_id": status.worker_id,
            "generation": status.generation}))
        self.log.producer.poll(0)

    def put_tombstone(self, key: str) -> None:
        self.log.producer.produce(self.log.topic, key=key.encode(), value=None)
        self.log.producer.poll(0)

    def put_topic(self, connector: str, topic: str) -> None:
        key = f"status-topic-{topic}:connector-{connector}"
        self.log.producer.produce(self.log.topic, key=key.encode(), value=dumps({"topic": {
            "name": topic, "connector": connector, "task": 0,
            "discoverTimestamp": int(time.time() * 1000)}}))
        self.log.producer.poll(0)

    def forget_topics(self, connector: str) -> None:
        with self.lock:
            topics = sorted(self.topics.get(connector, ()))
        for topic in topics:
            self.log.producer.produce(self.log.topic, value=None,
                                      key=f"status-topic-{topic}:connector-{connector}".encode())
        self.log.producer.flush(10)
        self.log.read_to_end()
