"""The group coordinator: classic consumer groups and committed offsets.

See README.md in this package for the state machine and the storage format.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from brokercore.replication.partition import TopicPartition

from .coordinator import CoordinatorConfig, GroupCoordinator
from .offsets_topic import OFFSETS_TOPIC, BrokerOffsetsTopic

if TYPE_CHECKING:
    from brokercore.broker import Broker
    from brokercore.server import RequestContext

__all__ = ["OFFSETS_TOPIC", "CoordinatorConfig", "GroupCoordinator", "attach_group_coordinator",
           "coordinator_of"]


async def attach_group_coordinator(broker: Broker) -> None:
    """Create this broker's group coordinator and load the offsets partitions it leads."""

    def topic_exists(tp: TopicPartition) -> bool:
        topic = broker.image.topics.get(tp.topic)
        return topic is not None and tp.partition in topic.partitions

    coordinator = GroupCoordinator(
        BrokerOffsetsTopic(broker), broker.clock,
        CoordinatorConfig.from_broker(broker.config), topic_exists,
    )
    broker.group_coordinator = coordinator
    coordinator.start()


def coordinator_of(ctx: RequestContext) -> GroupCoordinator:
    coordinator = ctx.broker.group_coordinator
    assert isinstance(coordinator, GroupCoordinator), "the group coordinator is not attached"
    return coordinator
