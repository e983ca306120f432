"""Produce (0): append record batches as leader; acks 0, 1 and all."""

import logging
from typing import Any

from kafka.protocol.producer import ProduceRequest, ProduceResponse

from brokercore.log import LogError
from brokercore.protocol.apis import serves
from brokercore.protocol.errors import ErrorCode
from brokercore.replication.partition import PartitionError, TopicPartition
from brokercore.server import NO_RESPONSE, RequestContext

log = logging.getLogger(__name__)

TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = TopicResponse.PartitionProduceResponse


# v0-2 carry message format v0/v1, which the log refuses (UNSUPPORTED_FOR_MESSAGE_FORMAT);
# min 0 is still advertised because librdkafka before 2.11.1 checks features against exact
# versions and would otherwise silently disable compression.
@serves(ProduceRequest, ProduceResponse, min_version=0, max_version=11)
async def handle(ctx: RequestContext, request: Any) -> Any:
    responses = [
        TopicResponse(
            name=topic.name,
            partition_responses=[
                _append(ctx, request.acks, topic.name, p.index, p.records)
                for p in topic.partition_data
            ],
        )
        for topic in request.topic_data
    ]
    if request.acks == 0:
        return NO_RESPONSE
    return ProduceResponse(responses=responses, throttle_time_ms=0)


def _append(ctx: RequestContext, acks: int, topic: str, index: int, records: Any) -> Any:
    tp = TopicPartition(topic, index)
    try:
        if acks not in (-1, 0, 1):
            raise PartitionError(ErrorCode.INVALID_REQUIRED_ACKS)
        partition = ctx.broker.replica_manager.leader_partition(tp)
        if acks == -1:
            min_isr = int(ctx.broker.replica_manager.topic_config(topic)["min.insync.replicas"][0]
                          or 1)
            if len(partition.isr) < min_isr:
                raise PartitionError(ErrorCode.NOT_ENOUGH_REPLICAS)
        if not records:
            raise PartitionError(ErrorCode.CORRUPT_MESSAGE, "empty record set")
        result = partition.append_as_leader(records)
    except PartitionError as exc:
        return _failed(index, exc.error_code, str(exc))
    except LogError as exc:
        log.info("node %d: rejected produce to %s from %s: %s",
                 ctx.broker.node_id, tp, ctx.client_id, exc)
        return _failed(index, exc.error_code, str(exc))
    return PartitionResponse(
        index=index, error_code=ErrorCode.NONE, base_offset=result.base_offset,
        log_append_time_ms=result.log_append_time, log_start_offset=result.log_start_offset,
        record_errors=[], error_message=None,
    )


def _failed(index: int, code: ErrorCode, message: str) -> Any:
    return PartitionResponse(
        index=index, error_code=code, base_offset=-1, log_append_time_ms=-1,
        log_start_offset=-1, record_errors=[], error_message=message,
    )
