"""ApiVersions (18): the versions of every API, derived from the handler registry."""

from typing import Any

from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import api_versions_entries, serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode


@serves(ApiVersionsRequest, ApiVersionsResponse, min_version=0, max_version=4)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    return ApiVersionsResponse(
        error_code=ErrorCode.NONE,
        api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=key, min_version=lo, max_version=hi)
            for key, lo, hi in api_versions_entries()
        ],
        throttle_time_ms=0,
        supported_features=[],
        finalized_features_epoch=-1,
        finalized_features=[],
        zk_migration_ready=False,
    )
