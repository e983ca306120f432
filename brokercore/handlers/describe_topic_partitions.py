"""DescribeTopicPartitions (75): topics and their partitions, a page at a time (KIP-966).

Topics are answered in name order, from the request's cursor (a topic and a partition
index) on, until `response_partition_limit` partitions (capped by the broker's
`max.request.partition.size.limit`) have been described; `next_cursor` then names the first
partition left out. No topics in the request means every topic. A named topic that does
not exist gets UNKNOWN_TOPIC_OR_PARTITION. Eligible leader replicas (KIP-966's ELR) are not
kept, so both ELR lists are null, as from a Kafka broker with ELR off.
"""

from __future__ import annotations

import uuid
from typing import Any

from kafka.protocol.admin import DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse

from brokercore.controller.controller import INTERNAL_TOPICS
from brokercore.controller.image import TopicImage
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclOperation

Topic = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
Partition = Topic.DescribeTopicPartitionsResponsePartition
Cursor = DescribeTopicPartitionsResponse.Cursor
ZERO_UUID = uuid.UUID(int=0)
UNKNOWN_OPERATIONS = -2147483648


@serves(DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse,
        min_version=0, max_version=0)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    image = broker.image
    authorizer = broker.authorizer
    if request.topics:  # named: each needs DESCRIBE (TOPIC_AUTHORIZATION_FAILED)
        names = sorted({t.name for t in request.topics})
        denied = {n for n in names
                  if not authorizer.authorize_topic(ctx, AclOperation.DESCRIBE, n)}
    else:  # all: those the principal may describe
        names = [n for n in sorted(image.topics)
                 if authorizer.authorize_topic(ctx, AclOperation.DESCRIBE, n, audit=False)]
        denied = set()
    start_topic, start_partition = "", 0
    if request.cursor is not None:
        start_topic, start_partition = request.cursor.topic_name, request.cursor.partition_index
    budget = max(1, min(request.response_partition_limit,
                        broker.config.get_int("max.request.partition.size.limit")))
    topics: list[Any] = []
    next_cursor = None
    for name in (n for n in names if n >= start_topic):
        topic = image.topics.get(name)
        if topic is None or name in denied:
            topics.append(Topic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED
                                if name in denied else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                name=name,
                                topic_id=ZERO_UUID, is_internal=False, partitions=[],
                                topic_authorized_operations=UNKNOWN_OPERATIONS))
            continue
        first = start_partition if name == start_topic else 0
        indexes = [i for i in sorted(topic.partitions) if i >= first]
        if len(indexes) > budget:
            next_cursor = Cursor(topic_name=name, partition_index=indexes[budget])
            indexes = indexes[:budget]
        topics.append(_describe(broker, topic, indexes))
        budget -= len(indexes)
        if next_cursor is not None:
            break
        if budget == 0:
            following = [n for n in names if n > name and n in image.topics]
            if following:
                next_cursor = Cursor(topic_name=following[0], partition_index=0)
            break
    return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=topics,
                                           next_cursor=next_cursor)


def _describe(broker: BrokerParts, topic: TopicImage, indexes: list[int]) -> Any:
    brokers = broker.image.brokers
    partitions = []
    for index in indexes:
        p = topic.partitions[index]
        partitions.append(Partition(
            error_code=ErrorCode.LEADER_NOT_AVAILABLE if p.leader == -1 else ErrorCode.NONE,
            partition_index=index, leader_id=p.leader, leader_epoch=p.leader_epoch,
            replica_nodes=p.replicas, isr_nodes=p.isr, eligible_leader_replicas=None,
            last_known_elr=None,
            offline_replicas=[r for r in p.replicas if r not in brokers or brokers[r].fenced],
        ))
    return Topic(error_code=ErrorCode.NONE, name=topic.name, topic_id=uuid.UUID(topic.topic_id),
                 is_internal=topic.name in INTERNAL_TOPICS, partitions=partitions,
                 topic_authorized_operations=UNKNOWN_OPERATIONS)
