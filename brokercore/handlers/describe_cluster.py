"""DescribeCluster (60): cluster id, controller and the live brokers."""

from typing import Any

from kafka.protocol.admin import DescribeClusterRequest, DescribeClusterResponse

from brokercore.handlers.authorization import cluster_operations
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode

Broker = DescribeClusterResponse.DescribeClusterBroker
BROKERS_ENDPOINT = 1


@serves(DescribeClusterRequest, DescribeClusterResponse, min_version=0, max_version=2)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    image = broker.image
    if ctx.api_version >= 1 and request.endpoint_type != BROKERS_ENDPOINT:
        # Kafka serves controller endpoints only on controller listeners.
        return DescribeClusterResponse(
            throttle_time_ms=0, error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
            error_message="The broker listener only serves the brokers endpoint type (1).",
            endpoint_type=request.endpoint_type, cluster_id=image.cluster_id or "",
            controller_id=-1, brokers=[],
        )
    with_fenced = ctx.api_version >= 2 and request.include_fenced_brokers
    return DescribeClusterResponse(
        authorized_operations=cluster_operations(
            broker, ctx, request.include_cluster_authorized_operations),
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
        endpoint_type=BROKERS_ENDPOINT, cluster_id=image.cluster_id or "",
        controller_id=broker.controller.active_controller_id,
        brokers=[
            Broker(broker_id=b.node_id, host=endpoint[0], port=endpoint[1], rack=b.rack,
                   is_fenced=b.fenced)
            for b in sorted(image.brokers.values(), key=lambda b: b.node_id)
            if (with_fenced or not b.fenced)
            and (endpoint := b.endpoint(ctx.listener)) is not None
        ],
    )
