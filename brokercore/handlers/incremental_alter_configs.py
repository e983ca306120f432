"""IncrementalAlterConfigs (44): SET, DELETE, APPEND and SUBTRACT single topic configs.

Topics and broker resources (dynamic configs) alike. Unlike AlterConfigs, overrides the
request does not name are kept. APPEND and SUBTRACT
apply to list configs only and start from the current value, the default included
(APPEND compact to cleanup.policy=delete gives "delete,compact").
"""

import enum
from typing import Any

from kafka.protocol.admin import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse

from brokercore.config import ConfigType
from brokercore.controller.controller import ControllerError
from brokercore.handlers.config_resources import AlterTarget, alter_each, alter_target
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode


class OpType(enum.IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@serves(IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
        min_version=0, max_version=1)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    return await alter_each(broker, ctx, request, IncrementalAlterConfigsResponse, _alter)


async def _alter(broker: BrokerParts, resource: Any, validate_only: bool) -> None:
    target = alter_target(broker, resource)
    changes = {c.name: _new_value(broker, target, c) for c in resource.configs}
    if changes:
        await target.alter(broker, changes, validate_only)


def _new_value(broker: BrokerParts, target: AlterTarget, config: Any) -> str | None:
    """The override after the operation; None removes it."""
    key = target.keys.get(config.name)
    if key is None:
        raise target.unknown(config.name)
    op = config.config_operation
    if op == OpType.DELETE:
        return None
    if config.value is None:
        raise ControllerError(ErrorCode.INVALID_REQUEST,
                              f"Null value not supported for : {config.name}")
    if op == OpType.SET:
        return str(config.value)
    if op not in (OpType.APPEND, OpType.SUBTRACT):
        raise ControllerError(ErrorCode.INVALID_REQUEST,
                              f"Unknown config operation {op} for {config.name}")
    if key.type is not ConfigType.LIST:
        verb = "append" if op == OpType.APPEND else "subtract"
        raise ControllerError(ErrorCode.INVALID_REQUEST,
                              f"Config value {verb} is not allowed for config key: {config.name}")
    base = target.current.get(config.name)
    if base is None:
        base = target.value_without_override(broker, config.name)
    items = [item for item in base.split(",") if item]
    given = [item.strip() for item in config.value.split(",") if item.strip()]
    if op == OpType.APPEND:
        return ",".join(items + [item for item in given if item not in items])
    return ",".join(item for item in items if item not in given)
