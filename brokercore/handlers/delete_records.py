"""DeleteRecords (21): move partitions' log start offsets forward, as their leader.

Offset -1 means the high watermark. Offsets past the high watermark are refused with
OFFSET_OUT_OF_RANGE, since deleting uncommitted records could not be undone on a leader
change. As in Kafka, the answer waits (up to the request's timeout_ms) until every live
replica has moved its log start that far, so no future leader can serve the deleted
records; its low watermark is then the smallest log start over those replicas. Followers
learn the leader's log start from their fetches and report theirs in the next one.
"""

import asyncio
import logging
from typing import Any

from kafka.protocol.admin import DeleteRecordsRequest, DeleteRecordsResponse

from brokercore.controller.elections import live_brokers
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.log import LogError
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.replication.partition import PartitionError
from brokercore.security.acls import AclOperation
from brokercore.topic_partition import TopicPartition

log = logging.getLogger(__name__)

TopicResult = DeleteRecordsResponse.DeleteRecordsTopicResult
PartitionResult = TopicResult.DeleteRecordsPartitionResult
HIGH_WATERMARK = -1


@serves(DeleteRecordsRequest, DeleteRecordsResponse, min_version=0, max_version=2)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    max_wait = max(request.timeout_ms, 0) / 1000
    topics = []
    for t in request.topics:
        if not broker.authorizer.authorize_topic(ctx, AclOperation.DELETE, t.name):
            topics.append(TopicResult(name=t.name, partitions=[
                PartitionResult(partition_index=p.partition_index, low_watermark=-1,
                                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                for p in t.partitions]))
            continue
        results = await asyncio.gather(*(_delete(broker, ctx, t.name, p, max_wait)
                                         for p in t.partitions))
        topics.append(TopicResult(name=t.name, partitions=list(results)))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)


async def _delete(
    broker: BrokerParts, ctx: RequestContext, topic: str, p: Any, max_wait: float
) -> Any:
    tp = TopicPartition(topic, p.partition_index)
    try:
        partition = broker.replicas.leader_partition(tp)
        offset = partition.high_watermark if p.offset == HIGH_WATERMARK else p.offset
        if not 0 <= offset <= partition.high_watermark:
            raise PartitionError(ErrorCode.OFFSET_OUT_OF_RANGE)
        log_start = partition.log.delete_records_before(offset)
    except (PartitionError, LogError) as exc:
        return PartitionResult(partition_index=p.partition_index, low_watermark=-1,
                               error_code=exc.error_code)
    log.info("node %d: %s deleted records of %s before %d; log start is %d",
             broker.node_id, ctx.client_id, tp, offset, log_start)
    code, low_watermark = await partition.wait_for_low_watermark(
        log_start, lambda: live_brokers(broker.replicas.image), max_wait)
    return PartitionResult(partition_index=p.partition_index, low_watermark=low_watermark,
                           error_code=code)
