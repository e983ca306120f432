"""MirrorCheckpointConnector: translates the source cluster's consumer group offsets through
the offset syncs and writes them as checkpoints to `<source alias>.checkpoints.internal` on
the target; with `sync.group.offsets.enabled=true` it also commits them for each group on
the target, so that a group moved there resumes where it stopped.

The connector lists the source's groups that match `groups` and not `groups.exclude` every
`refresh.groups.interval.seconds`, and deals them out to tasks (`task.assigned.groups`).
Every `emit.checkpoints.interval.seconds` a task reads each group's committed offsets on the
source, keeps the partitions of replicated topics, translates them (offsetsyncs.py) and
emits a checkpoint for each that changed. Every `sync.group.offsets.interval.seconds` it
commits the translated offsets on the target for groups with no active member there, and
only where that moves the group forward (Kafka's rule: a group that already consumed further
on the target is not rewound).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping

from clusterclient import ClusterClient, ClusterRequestError, ClusterUnavailable, TopicPartition
from connect.api import ConnectException, SourceRecord, SourceTask, Task
from connect.configdef import ConfigDef, Importance, Type, at_least
from connect.connectors.mirror.clusters import (
    MirrorConfig,
    MirrorConnector,
    _regex_list,
    base_config,
    topic_filter_config,
)
from connect.connectors.mirror.formats import Checkpoint, compile_list
from connect.connectors.mirror.offsetsyncs import SyncReader
from connect.connectors.mirror.source import OPTIONAL_BYTES
from connect.connectors.mirror.topics import ensure_compacted_topic

log = logging.getLogger(__name__)
FIRST_DISCOVERY_WAIT_S = 3.0


def checkpoint_config() -> ConfigDef:
    return (topic_filter_config(base_config())
            .define("groups", Type.LIST, [".*"], Importance.HIGH,
                    "Consumer groups to replicate. Supports comma-separated group IDs and "
                    "regexes.", validator=_regex_list)
            .define("groups.exclude", Type.LIST, ["console-consumer-.*", "connect-.*", "__.*"],
                    Importance.HIGH, "Exclude groups. Supports comma-separated group IDs and "
                    "regexes.", validator=_regex_list)
            .define("refresh.groups.enabled", Type.BOOLEAN, True, Importance.LOW,
                    "Whether to periodically check for new consumer groups.")
            .define("refresh.groups.interval.seconds", Type.DOUBLE, 600.0, Importance.LOW,
                    "Frequency of group refresh.")
            .define("emit.checkpoints.enabled", Type.BOOLEAN, True, Importance.LOW,
                    "Whether to replicate consumer offsets to target cluster.")
            .define("emit.checkpoints.interval.seconds", Type.DOUBLE, 60.0, Importance.LOW,
                    "Frequency of checkpoints.")
            .define("sync.group.offsets.enabled", Type.BOOLEAN, False, Importance.LOW,
                    "Whether to periodically write the translated offsets to "
                    "__consumer_offsets topic in target cluster, as long as no active "
                    "consumers in that group are connected to the target cluster")
            .define("sync.group.offsets.interval.seconds", Type.DOUBLE, 60.0, Importance.LOW,
                    "Frequency of consumer group offset sync.")
            .define("checkpoints.topic.replication.factor", Type.SHORT, 3, Importance.LOW,
                    "Replication factor for checkpoints topic.", validator=at_least(-1)))


class MirrorCheckpointConnector(MirrorConnector):
    kafka_class = "org.apache.kafka.connect.mirror.MirrorCheckpointConnector"

    def config(self) -> ConfigDef:
        return checkpoint_config()

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)
        self.mirror = MirrorConfig.parse(checkpoint_config(), props)
        values = checkpoint_config().parse(props)
        self.wanted = compile_list(values["groups"])
        self.unwanted = compile_list(values["groups.exclude"])
        self.refresh = values["refresh.groups.enabled"]
        self.refresh_s = values["refresh.groups.interval.seconds"]
        self.groups: list[str] | None = None
        self.lock = threading.Lock()
        self.started = False
        self.discovered = threading.Event()
        self.stopping = threading.Event()
        threading.Thread(target=self._discover_loop, daemon=True,
                         name=f"mirror-checkpoint-{props.get('name', '')}").start()
        self.discovered.wait(FIRST_DISCOVERY_WAIT_S)
        with self.lock:
            self.started = True

    def stop(self) -> None:
        self.stopping.set()

    def task_class(self) -> type[Task]:
        return MirrorCheckpointTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        groups = self.groups or []
        count = min(max_tasks, len(groups))
        shares: list[list[str]] = [[] for _ in range(count)]
        for i, group in enumerate(groups):
            shares[i % count].append(group)
        return [{**self.props, "task.assigned.groups": ",".join(share)} for share in shares]

    def _discover_loop(self) -> None:
        client = self.mirror.client("source")
        first = True
        while not self.stopping.is_set():
            try:
                found = sorted(g.group_id for g in client.list_groups()
                               if self.wanted.fullmatch(g.group_id)
                               and not self.unwanted.fullmatch(g.group_id))
            except (ClusterUnavailable, ClusterRequestError) as exc:
                if first:
                    self.context.raise_error(ConnectException(
                        f"source cluster {self.mirror.source_alias} "
                        f"({client.bootstrap_servers}) is unreachable: {exc}"))
                    return
                log.warning("mirror checkpoint %s: listing groups failed: %s",
                            self.mirror.source_alias, exc)
            else:
                with self.lock:
                    changed, late = found != self.groups, self.started
                    self.groups = found
                self.discovered.set()
                if changed and (late or not first):
                    self.context.request_task_reconfiguration()
                first = False
            if not self.refresh:
                return
            self.stopping.wait(self.refresh_s)


class MirrorCheckpointTask(SourceTask):
    def start(self, props: Mapping[str, str]) -> None:
        values = checkpoint_config().parse(props)
        self.mirror = mirror = MirrorConfig.parse(checkpoint_config(), props)
        self.groups = [g for g in props.get("task.assigned.groups", "").split(",") if g]
        self.emit = values["emit.checkpoints.enabled"]
        self.emit_every = values["emit.checkpoints.interval.seconds"]
        self.sync = values["sync.group.offsets.enabled"]
        self.sync_every = values["sync.group.offsets.interval.seconds"]
        self.source = mirror.client("source")
        self.target = mirror.client("target")
        mirror.probe(self.source, "source")
        mirror.probe(self.target, "target")
        self.checkpoints_topic = mirror.policy.checkpoints_topic(mirror.source_alias)
        try:
            ensure_compacted_topic(self.target, self.checkpoints_topic,
                                   values["checkpoints.topic.replication.factor"])
        except (ClusterUnavailable, ClusterRequestError) as exc:
            raise ConnectException(f"creating {self.checkpoints_topic} on target cluster "
                                   f"{mirror.target_alias} failed: {exc}") from exc
        syncs_at = mirror.source if mirror.offset_syncs_side == "source" else mirror.target
        self.reader = SyncReader(syncs_at, mirror.offset_syncs_topic)
        self.latest: dict[tuple[str, str, int], Checkpoint] = {}  # what was emitted
        self.next_emit = self.next_sync = time.monotonic()

    def poll(self) -> list[SourceRecord] | None:
        self.reader.read(0.5)
        if not self.groups or not self.reader.ready:
            return None
        now = time.monotonic()
        records: list[SourceRecord] = []
        if now >= self.next_emit or (self.sync and now >= self.next_sync):
            checkpoints = self._checkpoints()
            if self.emit and now >= self.next_emit:
                records = [self._record(c) for c in checkpoints if self._changed(c)]
                self.next_emit = now + self.emit_every
            if self.sync and now >= self.next_sync:
                self._sync_group_offsets(checkpoints)
                self.next_sync = now + self.sync_every
        return records or None

    def _checkpoints(self) -> list[Checkpoint]:
        found: list[Checkpoint] = []
        try:
            offsets = self.source.committed_offsets_many(self.groups)
        except ClusterUnavailable as exc:
            log.warning("mirror checkpoint %s: %s", self.mirror.source_alias, exc)
            return found
        policy, alias = self.mirror.policy, self.mirror.source_alias
        for group in self.groups:
            for tp, upstream in sorted(offsets[group].offsets.items()):
                if not self.mirror.replicates(tp.topic):
                    continue
                downstream = self.reader.table.translate(tp.topic, tp.partition, upstream)
                if downstream is not None:
                    found.append(Checkpoint(group, policy.format_remote_topic(alias, tp.topic),
                                            tp.partition, upstream, downstream))
        return found

    def _changed(self, checkpoint: Checkpoint) -> bool:
        key = (checkpoint.group, checkpoint.topic, checkpoint.partition)
        if self.latest.get(key) == checkpoint:
            return False
        self.latest[key] = checkpoint
        return True

    def _record(self, c: Checkpoint) -> SourceRecord:
        return SourceRecord({"group": c.group, "topic": c.topic, "partition": c.partition},
                            {"offset": 0}, self.checkpoints_topic, c.value(), OPTIONAL_BYTES,
                            c.key(), OPTIONAL_BYTES, 0, int(time.time() * 1000))

    def _sync_group_offsets(self, checkpoints: list[Checkpoint]) -> None:
        by_group: dict[str, dict[TopicPartition, int]] = {}
        for c in checkpoints:
            by_group.setdefault(c.group, {})[TopicPartition(c.topic, c.partition)] = (
                c.downstream_offset)
        try:
            states = self.target.describe_groups(list(by_group))
            committed = self.target.committed_offsets_many(list(by_group))
        except (ClusterUnavailable, ClusterRequestError) as exc:
            log.warning("mirror checkpoint: target %s: %s", self.mirror.target_alias, exc)
            return
        for group, translated in by_group.items():
            if states[group].state.active:
                continue  # consumers run there now: their own commits win
            current = committed[group].offsets
            forward = {tp: o for tp, o in translated.items() if current.get(tp, -1) < o}
            if forward:
                self._commit(self.target, group, forward)

    def _commit(self, target: ClusterClient, group: str,
                offsets: dict[TopicPartition, int]) -> None:
        try:
            target.alter_group_offsets(group, offsets)
        except (ClusterUnavailable, ClusterRequestError) as exc:
            log.warning("mirror checkpoint: committing %s on %s: %s", group,
                        self.mirror.target_alias, exc)

    def stop(self) -> None:
        reader = getattr(self, "reader", None)
        if reader is not None:
            reader.close()
