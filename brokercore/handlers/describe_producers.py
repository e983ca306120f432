"""DescribeProducers (61): the producers a partition leader remembers, with the start of
each one's open transaction and the coordinator epoch of its last marker."""

from typing import Any

from kafka.protocol.admin import DescribeProducersRequest, DescribeProducersResponse

from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.replication.partition import PartitionError
from brokercore.security.acls import AclOperation
from brokercore.topic_partition import TopicPartition

TopicResponse = DescribeProducersResponse.TopicResponse
PartitionResponse = TopicResponse.PartitionResponse
ProducerState = PartitionResponse.ProducerState


@serves(DescribeProducersRequest, DescribeProducersResponse, min_version=0, max_version=0)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    return DescribeProducersResponse(
        throttle_time_ms=0,
        topics=[
            TopicResponse(name=t.name, partitions=[
                _describe(broker, t.name, i) if authorized
                else PartitionResponse(partition_index=i,
                                       error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                       error_message=None, active_producers=[])
                for i in t.partition_indexes])
            for t in request.topics
            for authorized in (broker.authorizer.authorize_topic(ctx, AclOperation.READ,
                                                                 t.name),)
        ],
    )


def _describe(broker: BrokerParts, topic: str, index: int) -> Any:
    try:
        partition = broker.replicas.leader_partition(TopicPartition(topic, index))
    except PartitionError as exc:
        return PartitionResponse(partition_index=index, error_code=exc.error_code,
                                 error_message=None, active_producers=[])
    producers = partition.log.producers.producers
    return PartitionResponse(
        partition_index=index, error_code=ErrorCode.NONE, error_message=None,
        active_producers=[
            ProducerState(
                producer_id=entry.producer_id, producer_epoch=entry.epoch,
                last_sequence=entry.last_seq,
                last_timestamp=entry.last_timestamp,
                coordinator_epoch=entry.coordinator_epoch,
                current_txn_start_offset=entry.current_txn_first_offset,
            )
            for entry in sorted(producers.values(), key=lambda e: e.producer_id)
        ],
    )
