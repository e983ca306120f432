"""DescribeQuorum (55): the Raft quorum of the metadata log, `__cluster_metadata-0`.

Any broker answers: the figures come from the active controller (the Raft leader), over
the controller listener when that is another node, as a Kafka broker forwards this request
to its controller. Leader, epoch (the Raft term), high watermark (the commit offset + 1)
and, per voter, its log end offset and when it last fetched; an admin computes lag from
those. Every node is a voter, so there are no observers. v2 adds each voter's controller
listener.
"""

from __future__ import annotations

import uuid
from typing import Any

from kafka.protocol.admin import DescribeQuorumRequest, DescribeQuorumResponse

from brokercore.controller.controller import ControllerError
from brokercore.controller.quorum import QuorumState
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclOperation

METADATA_TOPIC = "__cluster_metadata"
Topic = DescribeQuorumResponse.TopicData
Partition = Topic.PartitionData
ReplicaState = Partition.ReplicaState
Node = DescribeQuorumResponse.Node
ZERO_UUID = uuid.UUID(int=0)


@serves(DescribeQuorumRequest, DescribeQuorumResponse, min_version=0, max_version=2)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    if not broker.authorizer.authorize_cluster(ctx, AclOperation.DESCRIBE):
        return _failed(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    wanted = [(t.topic_name, p.partition_index) for t in request.topics for p in t.partitions]
    if wanted != [(METADATA_TOPIC, 0)]:
        return _failed(ErrorCode.INVALID_REQUEST,
                       f"DescribeQuorum describes {METADATA_TOPIC}-0 only, not {wanted}")
    try:
        state = await broker.controller.describe_quorum()
    except ControllerError as exc:
        return _failed(exc.error_code, exc.message)
    listener = (broker.config.get("controller.listener.names") or "CONTROLLER").split(",")[0]
    nodes = [Node(node_id=node, listeners=[Node.Listener(name=listener.strip(), host=host,
                                                         port=port)])
             for node, (host, port) in sorted(broker.controller.voter_addresses().items())]
    return DescribeQuorumResponse(
        error_code=ErrorCode.NONE, error_message=None,
        topics=[Topic(topic_name=METADATA_TOPIC, partitions=[_partition(state)])],
        nodes=nodes,
    )


def _partition(state: QuorumState) -> Any:
    return Partition(
        partition_index=0, error_code=ErrorCode.NONE, error_message=None,
        leader_id=state.leader_id, leader_epoch=state.leader_epoch,
        high_watermark=state.high_watermark,
        current_voters=[
            ReplicaState(replica_id=v.node_id, replica_directory_id=ZERO_UUID,
                         log_end_offset=v.log_end_offset, last_fetch_timestamp=v.last_fetch_ms,
                         last_caught_up_timestamp=v.last_caught_up_ms)
            for v in state.voters
        ],
        observers=[],
    )


def _failed(code: ErrorCode, message: str) -> Any:
    return DescribeQuorumResponse(error_code=code, error_message=message,
                                  topics=[], nodes=[])
