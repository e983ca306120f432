"""ApiVersions (18): the versions of every API, derived from the handler registry."""

from typing import Any

from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from brokercore.protocol.apis import serves
from brokercore.protocol.errors import ErrorCode
from brokercore.server import RequestContext, api_versions_entries


@serves(ApiVersionsRequest, ApiVersionsResponse, min_version=0, max_version=4)
async def handle(ctx: RequestContext, request: Any) -> Any:
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
