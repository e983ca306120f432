"""DescribeConfigs (32): every config of a topic or broker with value, source and default.

Tansu's finding: clients (and people) expect the full list, defaults included, not just
overrides. v0 reports `is_default` instead of a source; v1+ add synonyms, v3+ types and
documentation.
"""

from typing import Any

from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse

from brokercore.config import ConfigSource
from brokercore.controller.controller import ControllerError
from brokercore.handlers.config_resources import (
    ConfigEntry,
    ResourceType,
    broker_entries,
    check_authorized,
    check_broker,
    check_group,
    check_topic,
    group_entries,
    topic_entries,
    unsupported_resource,
)
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclOperation

Result = DescribeConfigsResponse.DescribeConfigsResult
ResultConfig = Result.DescribeConfigsResourceResult
ResultSynonym = ResultConfig.DescribeConfigsSynonym


@serves(DescribeConfigsRequest, DescribeConfigsResponse, min_version=0, max_version=4)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    return DescribeConfigsResponse(
        throttle_time_ms=0,
        results=[_describe(broker, ctx, request, resource) for resource in request.resources],
    )


def _describe(broker: BrokerParts, ctx: RequestContext, request: Any, resource: Any) -> Any:
    try:
        check_authorized(broker, ctx, resource.resource_type, resource.resource_name,
                         AclOperation.DESCRIBE_CONFIGS)
        entries = _entries(broker, resource.resource_type, resource.resource_name)
    except ControllerError as exc:
        return Result(error_code=exc.error_code, error_message=exc.message,
                      resource_type=resource.resource_type,
                      resource_name=resource.resource_name, configs=[])
    # Kafka reads an empty key list like a null one: every key.
    if resource.configuration_keys:
        wanted = set(resource.configuration_keys)
        entries = [e for e in entries if e.name in wanted]
    synonyms = ctx.api_version >= 1 and request.include_synonyms
    docs = ctx.api_version >= 3 and request.include_documentation
    return Result(
        error_code=ErrorCode.NONE, error_message=None, resource_type=resource.resource_type,
        resource_name=resource.resource_name,
        configs=[_config(entry, synonyms, docs) for entry in entries],
    )


def _entries(broker: BrokerParts, resource_type: int, name: str) -> list[ConfigEntry]:
    if resource_type == ResourceType.TOPIC:
        check_topic(broker, name)
        return topic_entries(broker, name)
    if resource_type == ResourceType.BROKER:
        check_broker(broker, name)
        return broker_entries(broker, name)
    if resource_type == ResourceType.GROUP:
        check_group(name)
        return group_entries(broker, name)
    raise unsupported_resource(resource_type)


def _config(entry: ConfigEntry, synonyms: bool, docs: bool) -> Any:
    return ResultConfig(
        name=entry.name,
        value=None if entry.sensitive else entry.value,
        read_only=entry.read_only,
        config_source=entry.source,
        is_default=entry.source == ConfigSource.DEFAULT_CONFIG,
        is_sensitive=entry.sensitive,
        synonyms=[
            ResultSynonym(name=s.name, value=None if entry.sensitive else s.value,
                          source=s.source)
            for s in entry.synonyms
        ] if synonyms else [],
        config_type=entry.key.type,
        documentation=entry.key.doc if docs else None,
    )
