"""MirrorSourceConnector: copies the topics that match `topics` from the source cluster to
`<source alias>.<topic>` on the target, partition for partition, with keys, values, headers
and timestamps as they are, and writes offset syncs that say where each record landed.

The connector lists the matching topic-partitions on the source every
`refresh.topics.interval.seconds` and asks for new task configs when they change; tasks
split the partitions (`task.assigned.partitions`). Each task creates its topics' remote
topics (the source's partition count and the configs set on the source topic), consumes its
partitions from the offsets the framework stored (`{cluster, topic, partition}` ->
`{offset}`, Kafka's), and hands the records to the worker, which produces them to its own
cluster: as in Kafka, the Connect cluster's Kafka is the target.

An offset sync `(upstream, downstream)` is written when the first record of a partition
lands, when a record lands `offset.lag.max` or more records after the last sync, when the
mapping jumps backwards, and, for the newest record, each time the framework commits
offsets. So a checkpoint translated through it is at most `offset.lag.max` records early.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from clusterclient import ClusterClient, ClusterRequestError, ClusterUnavailable
from connect.api import (
    ConnectException,
    Schema,
    SourceRecord,
    SourceTask,
    Task,
)
from connect.configdef import ConfigDef, Importance, Type, at_least
from connect.connectors.mirror.clusters import (
    MirrorConfig,
    MirrorConnector,
    base_config,
    topic_filter_config,
)
from connect.connectors.mirror.formats import OffsetSync
from connect.connectors.mirror.topics import ensure_compacted_topic, sync_remote_topics

log = logging.getLogger(__name__)
OPTIONAL_BYTES = Schema("bytes", optional=True)
FIRST_DISCOVERY_WAIT_S = 3.0  # start() runs on the herder thread: never longer


def source_config() -> ConfigDef:
    return (topic_filter_config(base_config())
            .define("refresh.topics.enabled", Type.BOOLEAN, True, Importance.LOW,
                    "Whether to periodically check for new topics and partitions.")
            .define("refresh.topics.interval.seconds", Type.DOUBLE, 600.0, Importance.LOW,
                    "Frequency of topic refresh.")
            .define("sync.topic.configs.enabled", Type.BOOLEAN, True, Importance.LOW,
                    "Whether to periodically configure remote topics to match their "
                    "corresponding upstream topics.")
            .define("sync.topic.configs.interval.seconds", Type.DOUBLE, 600.0, Importance.LOW,
                    "Frequency of topic config sync.")
            .define("replication.factor", Type.INT, 2, Importance.LOW,
                    "Replication factor for newly created remote topics.",
                    validator=at_least(-1))
            .define("offset-syncs.topic.replication.factor", Type.SHORT, 3, Importance.LOW,
                    "Replication factor for offset-syncs topic.", validator=at_least(-1))
            .define("offset.lag.max", Type.LONG, 100, Importance.LOW,
                    "How out-of-sync a remote partition can be before it is resynced.",
                    validator=at_least(0))
            .define("emit.offset-syncs.enabled", Type.BOOLEAN, True, Importance.LOW,
                    "Whether to store the new offset of the replicated records in "
                    "offset-syncs topic or not."))


class MirrorSourceConnector(MirrorConnector):
    kafka_class = "org.apache.kafka.connect.mirror.MirrorSourceConnector"

    def config(self) -> ConfigDef:
        return source_config()

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)
        self.mirror = MirrorConfig.parse(source_config(), props)
        values = source_config().parse(props)
        self.refresh_s = values["refresh.topics.interval.seconds"]
        self.refresh = values["refresh.topics.enabled"]
        self.partitions: list[tuple[str, int]] | None = None
        self.lock = threading.Lock()
        self.started = False
        self.discovered = threading.Event()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._discover_loop, daemon=True,
                                       name=f"mirror-source-{props.get('name', '')}")
        self.thread.start()
        self.discovered.wait(FIRST_DISCOVERY_WAIT_S)
        with self.lock:  # a listing that comes later asks for task configs itself
            self.started = True

    def stop(self) -> None:
        self.stopping.set()

    def task_class(self) -> type[Task]:
        return MirrorSourceTask

    def exactly_once_support(self, props: Mapping[str, str]) -> bool | None:
        return True  # offsets are the source's own: a restart resumes exactly after them

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """Partitions dealt round robin, so each task gets a share of every topic."""
        partitions = self.partitions or []
        count = min(max_tasks, len(partitions))
        shares: list[list[str]] = [[] for _ in range(count)]
        for i, (topic, partition) in enumerate(partitions):
            shares[i % count].append(f"{topic}-{partition}")
        return [{**self.props, "task.assigned.partitions": ",".join(share)} for share in shares]

    def _discover_loop(self) -> None:
        client = self.mirror.client("source")
        first = True
        while not self.stopping.is_set():
            try:
                found = self._matching(client)
            except (ClusterUnavailable, ClusterRequestError) as exc:
                if first:  # nothing to replicate from: the connector fails, with the reason
                    self.context.raise_error(ConnectException(
                        f"source cluster {self.mirror.source_alias} "
                        f"({client.bootstrap_servers}) is unreachable: {exc}"))
                    return
                log.warning("mirror source %s: listing topics failed: %s",
                            self.mirror.source_alias, exc)
            else:
                with self.lock:
                    changed, late = found != self.partitions, self.started
                    self.partitions = found
                self.discovered.set()
                if changed and (late or not first):
                    log.info("mirror source %s: %d partitions match",
                             self.mirror.source_alias, len(found))
                    self.context.request_task_reconfiguration()
                first = False
            if not self.refresh:
                return
            self.stopping.wait(self.refresh_s)

    def _matching(self, client: ClusterClient) -> list[tuple[str, int]]:
        topics = client.metadata(refresh=True).topics
        return sorted((name, p.partition) for name, meta in topics.items()
                      if meta.error is None and self.mirror.replicates(name)
                      for p in meta.partitions)


class _SyncState:
    """The offset syncs of one partition: the last one written and the newest mapping not
    written yet."""
    __slots__ = ("last", "partition", "pending", "topic")

    def __init__(self, topic: str, partition: int) -> None:
        self.topic, self.partition = topic, partition
        self.last: tuple[int, int] | None = None
        self.pending: tuple[int, int] | None = None


class MirrorSourceTask(SourceTask):
    def start(self, props: Mapping[str, str]) -> None:
        values = source_config().parse(props)
        self.mirror = mirror = MirrorConfig.parse(source_config(), props)
        self.lag_max = values["offset.lag.max"]
        self.emit_syncs = values["emit.offset-syncs.enabled"]
        self.sync_configs = values["sync.topic.configs.enabled"]
        self.sync_every = values["sync.topic.configs.interval.seconds"]
        assigned = [a.rsplit("-", 1) for a in
                    props.get("task.assigned.partitions", "").split(",") if a]
        self.assigned = [(t, int(p)) for t, p in assigned]
        self.source = mirror.client("source")
        self.target = mirror.client("target")
        mirror.probe(self.source, "source")
        mirror.probe(self.target, "target")
        self.topics = sorted({t for t, _ in self.assigned})
        self.replication = values["replication.factor"]
        self._sync_topics()
        self.syncs: dict[int, _SyncState] = {}
        self.sync_errors: list[KafkaError] = []
        self.sync_producer: Producer | None = None
        if self.emit_syncs:
            side = mirror.offset_syncs_side
            ensure_compacted_topic(self.source if side == "source" else self.target,
                                   mirror.offset_syncs_topic,
                                   values["offset-syncs.topic.replication.factor"])
            settings = mirror.source if side == "source" else mirror.target
            self.sync_producer = Producer({
                **settings, "acks": "all", "linger.ms": 5,
                "message.timeout.ms": int(mirror.admin_timeout_s * 1000),
                "client.id": f"mirrormaker-offset-syncs-{mirror.source_alias}"})
        self.consumer = self._consumer()
        self.partition_maps = {tp: {"cluster": mirror.source_alias, "partition": tp[1],
                                    "topic": tp[0]} for tp in self.assigned}
        self.remote = {t: mirror.policy.format_remote_topic(mirror.source_alias, t)
                       for t in self.topics}

    def _sync_topics(self) -> None:
        try:
            sync_remote_topics(self.source, self.target, self.mirror, self.topics,
                               self.replication, self.sync_configs)
        except (ClusterUnavailable, ClusterRequestError) as exc:
            raise ConnectException(
                f"creating the remote topics of {', '.join(self.topics)} on target cluster "
                f"{self.mirror.target_alias} ({self.target.bootstrap_servers}) failed: "
                f"{exc}") from exc
        self.next_config_sync = time.monotonic() + self.sync_every

    def _consumer(self) -> Consumer:
        consumer = Consumer({
            **self.mirror.source, "group.id": f"mirrormaker-{self.mirror.source_alias}",
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "isolation.level": "read_committed", "fetch.queue.backoff.ms": 20,
            "client.id": f"mirrormaker-source-{self.mirror.source_alias}"})
        reader = self.context.offset_storage_reader
        start = []
        for topic, partition in self.assigned:
            stored = reader.offset({"cluster": self.mirror.source_alias,
                                    "partition": partition, "topic": topic})
            offset = int(stored["offset"]) + 1 if stored else OFFSET_BEGINNING
            start.append(TopicPartition(topic, partition, offset))
        consumer.assign(start)
        return consumer

    def poll(self) -> list[SourceRecord] | None:
        if self.sync_errors:
            raise KafkaException(self.sync_errors[0])
        if self.sync_configs and time.monotonic() >= self.next_config_sync:
            self._sync_topics()
        if not self.assigned:
            time.sleep(0.5)
            return None
        batch = self.consumer.consume(1000, 0.5)
        records: list[SourceRecord] = []
        append, maps, remote = records.append, self.partition_maps, self.remote
        for msg in batch:  # the hot loop: as little as possible per record
            error = msg.error()
            if error is not None:
                if error.fatal():
                    raise KafkaException(error)
                log.info("mirror source %s: %s", self.mirror.source_alias, error)
                continue
            topic, partition = msg.topic(), msg.partition()
            kind, ts = msg.timestamp()
            headers = msg.headers()
            # no schemas: ByteArrayConverter passes bytes through as they are
            append(SourceRecord(
                maps[(topic, partition)], {"offset": msg.offset()}, remote[topic],
                msg.value(), None, msg.key(), None, partition,
                None if kind == TIMESTAMP_NOT_AVAILABLE else ts,
                tuple(headers) if headers else ()))
        return records or None

    def commit_record(self, record: SourceRecord, partition: int, offset: int) -> None:
        if self.sync_producer is None:
            return
        # by the partition map object: one per source partition, shared by its records
        state = self.syncs.get(id(record.source_partition))
        if state is None:
            source = record.source_partition
            state = self.syncs[id(source)] = _SyncState(source["topic"], source["partition"])
        upstream = record.source_offset["offset"]
        last = state.last
        if (last is None or upstream - last[0] >= self.lag_max or upstream < last[0]
                or offset < last[1]):
            self._write_sync(state, (upstream, offset))
        else:
            state.pending = (upstream, offset)

    def commit(self) -> None:
        """The offsets are stored: write the newest mapping of every partition."""
        for state in self.syncs.values():
            if state.pending is not None:
                self._write_sync(state, state.pending)
        if self.sync_producer is not None:
            self.sync_producer.poll(0)

    def _write_sync(self, state: _SyncState, mapping: tuple[int, int]) -> None:
        assert self.sync_producer is not None
        sync = OffsetSync(state.topic, state.partition, *mapping)

        def delivered(err: KafkaError | None, _msg: Any) -> None:
            if err is not None:
                self.sync_errors.append(err)
        while True:
            try:
                self.sync_producer.produce(self.mirror.offset_syncs_topic, sync.value(),
                                           sync.key(), partition=0, on_delivery=delivered)
                break
            except BufferError:
                self.sync_producer.poll(0.1)
        state.last, state.pending = mapping, None

    def stop(self) -> None:
        consumer = getattr(self, "consumer", None)
        if consumer is not None:
            consumer.close()
        if getattr(self, "sync_producer", None) is not None:
            assert self.sync_producer is not None
            self.sync_producer.flush(10)
