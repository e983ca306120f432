"""The group coordinator: classic and KIP-848 consumer groups, and committed offsets.

See README.md in this package for the state machine and the storage format.
"""

from __future__ import annotations

from brokercore.clock import Clock
from brokercore.config import BrokerConfig
from brokercore.controller.controller import Controller
from brokercore.replication.replica_manager import ReplicaManager
from brokercore.topic_partition import TopicPartition

from .config import CoordinatorConfig
from .coordinator import GroupCoordinator
from .offsets_topic import OFFSETS_TOPIC, BrokerOffsetsTopic

__all__ = ["OFFSETS_TOPIC", "CoordinatorConfig", "GroupCoordinator", "broker_group_coordinator"]


def broker_group_coordinator(
    config: BrokerConfig, replicas: ReplicaManager, controller: Controller, clock: Clock
) -> GroupCoordinator:
    """The group coordinator of a broker, on its own logs; `start()` loads what it leads."""
    image = controller.image

    def topic_exists(tp: TopicPartition) -> bool:
        topic = image.topics.get(tp.topic)
        return topic is not None and tp.partition in topic.partitions

    def topics() -> dict[str, tuple[str, int]]:
        return {name: (t.topic_id, len(t.partitions)) for name, t in image.topics.items()}

    def group_configs(group_id: str) -> dict[str, str]:
        return image.group_configs.get(group_id, {})

    return GroupCoordinator(
        BrokerOffsetsTopic(replicas, controller, config), clock,
        CoordinatorConfig.from_broker(config), topic_exists, topics, group_configs,
    )
