"""AlterConfigs (33): replace a topic's whole set of config overrides (Kafka's semantics).

Overrides the request does not name are removed, so a topic altered with an empty list
goes back to the broker defaults, and a broker resource to its static configs.
"""

from typing import Any

from kafka.protocol.admin import AlterConfigsRequest, AlterConfigsResponse

from brokercore.controller.controller import ControllerError
from brokercore.handlers.config_resources import alter_each, alter_target
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode


@serves(AlterConfigsRequest, AlterConfigsResponse, min_version=0, max_version=2)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    return await alter_each(broker, ctx, request, AlterConfigsResponse, _alter)


async def _alter(broker: BrokerParts, resource: Any, validate_only: bool) -> None:
    target = alter_target(broker, resource)
    nulls = [c.name for c in resource.configs if c.value is None]
    if nulls:
        raise ControllerError(ErrorCode.INVALID_REQUEST,
                              f"Null value not supported for : {', '.join(nulls)}")
    changes: dict[str, str | None] = {name: None for name in target.current}
    changes.update({c.name: c.value for c in resource.configs})
    if changes:
        await target.alter(broker, changes, validate_only)
