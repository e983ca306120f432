"""Topics on the two clusters: MirrorMaker's internal topics (one partition, compacted) and
the remote topics, created with their source topic's partition count and the configs set
on it, and kept in step (more partitions, changed configs) when synced again."""

from __future__ import annotations

import logging

from clusterclient import ClusterClient, ClusterRequestError, ConfigChange, ResourceKind
from connect.connectors.mirror.clusters import MirrorConfig

log = logging.getLogger(__name__)
TOPIC_ALREADY_EXISTS = 36
# Kafka's DefaultConfigPropertyFilter: configs that belong to each cluster, never copied
NOT_COPIED = frozenset({
    "follower.replication.throttled.replicas", "leader.replication.throttled.replicas",
    "message.timestamp.difference.max.ms", "message.timestamp.type",
    "unclean.leader.election.enable", "min.insync.replicas",
})
SET_ON_TOPIC = "DYNAMIC_TOPIC_CONFIG"


def ensure_compacted_topic(client: ClusterClient, name: str, replication: int) -> None:
    try:
        client.create_topic(name, 1, replication, {"cleanup.policy": "compact"})
    except ClusterRequestError as exc:
        if exc.code != TOPIC_ALREADY_EXISTS:
            raise


def _copied_configs(source: ClusterClient, topic: str) -> dict[str, str]:
    return {e.name: e.value for e in source.topic_configs(topic)
            if e.source == SET_ON_TOPIC and e.name not in NOT_COPIED and e.value is not None}


def sync_remote_topics(source: ClusterClient, target: ClusterClient, mirror: MirrorConfig,
                       topics: list[str], replication: int, sync_configs: bool) -> None:
    """Each topic's remote topic exists with at least its partitions and, when
    `sync_configs`, its configs."""
    on_target = target.metadata(refresh=True).topics
    for topic in topics:
        partitions = len(source.topic(topic).partitions)
        configs = _copied_configs(source, topic) if sync_configs else {}
        remote = mirror.policy.format_remote_topic(mirror.source_alias, topic)
        existing = on_target.get(remote)
        if existing is None or (existing.error is not None and not existing.partitions):
            try:
                target.create_topic(remote, partitions, replication, configs)
                log.info("created remote topic %s (%d partitions)", remote, partitions)
                continue
            except ClusterRequestError as exc:
                if exc.code != TOPIC_ALREADY_EXISTS:  # another task made it meanwhile
                    raise
            existing = target.topic(remote)
        if len(existing.partitions) < partitions:
            target.create_partitions(remote, partitions)
        if configs:
            target.incremental_alter_configs(
                ResourceKind.TOPIC, remote, [ConfigChange(k, v) for k, v in configs.items()])
