"""MirrorHeartbeatConnector: one task that writes a heartbeat `{source alias, target alias,
timestamp}` to the `heartbeats` topic every `emit.heartbeats.interval.seconds`. It goes to
the worker's cluster, the target; a MirrorSourceConnector replicating the other way copies it
on as `<alias>.heartbeats`, which shows the whole flow alive and how far behind it is."""

from __future__ import annotations

import time
from collections.abc import Mapping

from clusterclient import ClusterRequestError, ClusterUnavailable
from connect.api import ConnectException, SourceRecord, SourceTask, Task
from connect.configdef import ConfigDef, Importance, Type, at_least
from connect.connectors.mirror.clusters import (
    MirrorConfig,
    MirrorConnector,
    base_config,
)
from connect.connectors.mirror.formats import HEARTBEATS_TOPIC, Heartbeat
from connect.connectors.mirror.source import OPTIONAL_BYTES
from connect.connectors.mirror.topics import ensure_compacted_topic


def heartbeat_config() -> ConfigDef:
    return (base_config()
            .define("emit.heartbeats.enabled", Type.BOOLEAN, True, Importance.LOW,
                    "Whether to emit heartbeats to target cluster.")
            .define("emit.heartbeats.interval.seconds", Type.DOUBLE, 1.0, Importance.LOW,
                    "Frequency of heartbeats.")
            .define("heartbeats.topic.replication.factor", Type.SHORT, 3, Importance.LOW,
                    "Replication factor for heartbeats topic.", validator=at_least(-1)))


class MirrorHeartbeatConnector(MirrorConnector):
    kafka_class = "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector"

    def config(self) -> ConfigDef:
        return heartbeat_config()

    def start(self, props: Mapping[str, str]) -> None:
        MirrorConfig.parse(heartbeat_config(), props)
        self.props = dict(props)
        self.enabled = heartbeat_config().parse(props)["emit.heartbeats.enabled"]

    def task_class(self) -> type[Task]:
        return MirrorHeartbeatTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)] if self.enabled else []  # one is enough


class MirrorHeartbeatTask(SourceTask):
    def start(self, props: Mapping[str, str]) -> None:
        values = heartbeat_config().parse(props)
        self.mirror = MirrorConfig.parse(heartbeat_config(), props)
        self.every = values["emit.heartbeats.interval.seconds"]
        target = self.mirror.client("target")
        self.mirror.probe(target, "target")
        try:
            ensure_compacted_topic(target, HEARTBEATS_TOPIC,
                                   values["heartbeats.topic.replication.factor"])
        except (ClusterUnavailable, ClusterRequestError) as exc:
            raise ConnectException(f"creating {HEARTBEATS_TOPIC} on target cluster "
                                   f"{self.mirror.target_alias} failed: {exc}") from exc
        self.partition = {"sourceClusterAlias": self.mirror.source_alias,
                          "targetClusterAlias": self.mirror.target_alias}
        self.next_at = time.monotonic()

    def poll(self) -> list[SourceRecord] | None:
        wait = self.next_at - time.monotonic()
        if wait > 0:
            time.sleep(min(wait, 0.5))
            return None
        self.next_at = max(self.next_at + self.every, time.monotonic())  # no burst after a pause
        now = int(time.time() * 1000)
        beat = Heartbeat(self.mirror.source_alias, self.mirror.target_alias, now)
        return [SourceRecord(self.partition, {"offset": 0}, HEARTBEATS_TOPIC, beat.value(),
                             OPTIONAL_BYTES, beat.key(), OPTIONAL_BYTES, 0, now)]

    def stop(self) -> None:
        pass
