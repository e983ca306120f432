"""WriteTxnMarkers (27): a transaction coordinator asks this broker, as leader, to end a
producer's transaction in some partitions with a commit or abort marker (a control batch).

Each marker is answered once the partition's in-sync replicas have it, as Kafka's are
(acks=all). In `__consumer_offsets`, the marker then applies or drops the offsets the
transaction committed (TxnOffsetCommit).
"""

import asyncio
from typing import Any

from kafka.protocol.producer import WriteTxnMarkersRequest, WriteTxnMarkersResponse

from brokercore.coordinator import OFFSETS_TOPIC
from brokercore.coordinator.records import TxnMarker
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.log import LogError
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.replication.partition import PartitionError
from brokercore.security.acls import AclOperation
from brokercore.topic_partition import TopicPartition

Result = WriteTxnMarkersResponse.WritableTxnMarkerResult
TopicResult = Result.WritableTxnMarkerTopicResult
PartitionResult = TopicResult.WritableTxnMarkerPartitionResult


@serves(WriteTxnMarkersRequest, WriteTxnMarkersResponse, min_version=1, max_version=1)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    results = []
    # a cluster action: only brokers (transaction coordinators) write markers
    allowed = broker.authorizer.authorize_cluster(ctx, AclOperation.CLUSTER_ACTION)
    for marker in request.markers:
        partitions = [TopicPartition(t.name, p) for t in marker.topics
                      for p in t.partition_indexes]
        codes = await asyncio.gather(*(_write(broker, marker, tp) for tp in partitions)) \
            if allowed else [ErrorCode.CLUSTER_AUTHORIZATION_FAILED] * len(partitions)
        by_topic: dict[str, list[Any]] = {}
        for tp, code in zip(partitions, codes, strict=True):
            by_topic.setdefault(tp.topic, []).append(
                PartitionResult(partition_index=tp.partition, error_code=code))
        results.append(Result(producer_id=marker.producer_id, topics=[
            TopicResult(name=name, partitions=parts) for name, parts in by_topic.items()]))
    return WriteTxnMarkersResponse(markers=results)


async def _write(broker: BrokerParts, marker: Any, tp: TopicPartition) -> ErrorCode:
    commit = bool(marker.transaction_result)
    try:
        partition = broker.replicas.leader_partition(tp)
        partition.check_min_insync_replicas()
        result = partition.append_marker(marker.producer_id, marker.producer_epoch, commit,
                                         marker.coordinator_epoch)
    except (PartitionError, LogError) as exc:
        return exc.error_code
    timeout = broker.config.get_int("offsets.commit.timeout.ms") / 1000
    code = await partition.wait_until_replicated(result.last_offset, timeout)
    if code == ErrorCode.NONE and tp.topic == OFFSETS_TOPIC:
        broker.groups.offsets.complete_txn(tp.partition, TxnMarker(
            marker.producer_id, marker.producer_epoch, commit, result.last_offset))
    return code
