"""AlterConfigs (33): replace a topic's whole set of config overrides (Kafka's semantics).

Overrides the request does not name are removed, so a topic altered with an empty list
goes back to the broker defaults. Broker resources are refused: this broker has no
dynamic broker configs.
"""

from collections import Counter
from typing import Any

from kafka.protocol.admin import AlterConfigsRequest, AlterConfigsResponse

from brokercore.controller.controller import ControllerError
from brokercore.handlers.config_resources import (
    ResourceType,
    broker_alter_error,
    check_broker,
    check_topic,
    unsupported_resource,
)
from brokercore.protocol.apis import serves
from brokercore.protocol.errors import ErrorCode
from brokercore.server import RequestContext

Result = AlterConfigsResponse.AlterConfigsResourceResponse


@serves(AlterConfigsRequest, AlterConfigsResponse, min_version=0, max_version=2)
async def handle(ctx: RequestContext, request: Any) -> Any:
    seen = Counter((r.resource_type, r.resource_name) for r in request.resources)
    responses = []
    for resource in request.resources:
        try:
            if seen[(resource.resource_type, resource.resource_name)] > 1:
                raise ControllerError(ErrorCode.INVALID_REQUEST, "Duplicate resource.")
            await _alter(ctx, resource, request.validate_only)
        except ControllerError as exc:
            responses.append(_result(resource, exc.error_code, exc.message))
        else:
            responses.append(_result(resource, ErrorCode.NONE, None))
    return AlterConfigsResponse(throttle_time_ms=0, responses=responses)


async def _alter(ctx: RequestContext, resource: Any, validate_only: bool) -> None:
    names = [c.name for c in resource.configs]
    if resource.resource_type == ResourceType.BROKER:
        check_broker(ctx.broker, resource.resource_name)
        if names:  # an empty change of no dynamic configs is a no-op
            raise broker_alter_error(names)
        return
    if resource.resource_type != ResourceType.TOPIC:
        raise unsupported_resource(resource.resource_type)
    check_topic(ctx.broker, resource.resource_name)
    duplicates = sorted(n for n, count in Counter(names).items() if count > 1)
    if duplicates:
        raise ControllerError(ErrorCode.INVALID_REQUEST,
                              f"Error due to duplicate config keys: {', '.join(duplicates)}")
    nulls = [c.name for c in resource.configs if c.value is None]
    if nulls:
        raise ControllerError(ErrorCode.INVALID_REQUEST,
                              f"Null value not supported for : {', '.join(nulls)}")
    current = ctx.broker.image.topics[resource.resource_name].configs
    changes: dict[str, str | None] = {name: None for name in current}
    changes.update({c.name: c.value for c in resource.configs})
    await ctx.broker.controller.alter_topic_configs(
        resource.resource_name, changes, validate_only=validate_only
    )


def _result(resource: Any, code: ErrorCode, message: str | None) -> Any:
    return Result(error_code=code, error_message=message, resource_type=resource.resource_type,
                  resource_name=resource.resource_name)
