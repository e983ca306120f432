"""Config resources as the config APIs see them: every key with value, source and synonyms.

DescribeConfigs, CreateTopics v5 and the two AlterConfigs APIs share this view, so a value
reads the same whichever API reports it. A topic value is its override, else the first
broker synonym set (dynamically for this broker, for the cluster, or statically), else
Kafka's default. A broker value comes from the same layers; only Kafka's dynamic broker
configs (the topic defaults) may change at run time, the rest are read-only.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from brokercore.config import (
    BROKER_CONFIGS,
    DYNAMIC_BROKER_CONFIGS,
    GROUP_CONFIGS,
    TOPIC_CONFIGS,
    ConfigKey,
    ConfigSource,
    ConfigType,
)
from brokercore.controller.controller import ControllerError, validate_topic_name
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclOperation

if TYPE_CHECKING:
    from brokercore.handlers.parts import BrokerParts


class ResourceType(enum.IntEnum):
    """Kafka's ConfigResource.Type codes."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    GROUP = 32


@dataclass(frozen=True)
class Synonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True)
class ConfigEntry:
    key: ConfigKey
    value: str | None
    source: ConfigSource
    read_only: bool
    synonyms: list[Synonym] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.key.name

    @property
    def sensitive(self) -> bool:
        return self.key.type is ConfigType.PASSWORD


def topic_entries(broker: BrokerParts, topic: str) -> list[ConfigEntry]:
    """Every topic config of an existing topic, in name order."""
    return topic_entries_for(broker, broker.image.topics[topic].configs)


def topic_entries_for(broker: BrokerParts, overrides: dict[str, str]) -> list[ConfigEntry]:
    """Every topic config of a topic with these overrides (which may not exist yet)."""
    entries = []
    for name, key in sorted(TOPIC_CONFIGS.items()):
        value: str | None
        if name in overrides:
            value, source = overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG
        else:
            value, source = broker.config.topic_default(name)
        synonyms = _topic_synonyms(broker, key, overrides.get(name))
        entries.append(ConfigEntry(key, value, source, read_only=False, synonyms=synonyms))
    return entries


def _topic_synonyms(broker: BrokerParts, key: ConfigKey, override: str | None) -> list[Synonym]:
    """Where a topic value could come from, most specific first, as Kafka lists them."""
    synonyms = []
    if override is not None:
        synonyms.append(Synonym(key.name, override, ConfigSource.DYNAMIC_TOPIC_CONFIG))
    for name, _scale in key.synonyms:
        synonyms += [Synonym(name, value, source)
                     for value, source in broker.config.layers(name)]
    # The default is reported under the broker key that carries it (log.retention.hours=168).
    defaulted = [name for name, _ in key.synonyms if BROKER_CONFIGS[name].default is not None]
    if defaulted:
        name = defaulted[-1]
        synonyms.append(Synonym(name, BROKER_CONFIGS[name].default, ConfigSource.DEFAULT_CONFIG))
    else:
        synonyms.append(Synonym(key.name, key.default, ConfigSource.DEFAULT_CONFIG))
    return synonyms


def broker_entries(broker: BrokerParts, name: str) -> list[ConfigEntry]:
    """The configs of broker resource `name`, in name order: for this broker's id, every
    config with its source (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
    STATIC_BROKER_CONFIG or DEFAULT_CONFIG); for "", the cluster-wide dynamic defaults set.
    Read-only unless Kafka can change the key at run time."""
    if name == "":
        defaults = broker.image.broker_configs.get("", {})
        source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        return [ConfigEntry(BROKER_CONFIGS[key], value, source, read_only=False,
                            synonyms=[Synonym(key, value, source)])
                for key, value in sorted(defaults.items()) if key in BROKER_CONFIGS]
    # As Kafka lists them: an internal key only where it is set.
    return [_broker_entry(broker, key) for _, key in sorted(BROKER_CONFIGS.items())
            if not key.internal or broker.config.layers(key.name)]


def _broker_entry(broker: BrokerParts, key: ConfigKey) -> ConfigEntry:
    value, source = broker.config.broker_value(key.name)
    if key.name in ("node.id", "broker.id"):
        value = str(broker.node_id)
    elif key.name == "cluster.id" and value is None:
        value = broker.image.cluster_id
    synonyms = [Synonym(key.name, v, s) for v, s in broker.config.layers(key.name)]
    if key.default is not None:
        synonyms.append(Synonym(key.name, key.default, ConfigSource.DEFAULT_CONFIG))
    return ConfigEntry(key, value, source, read_only=key.name not in DYNAMIC_BROKER_CONFIGS,
                       synonyms=synonyms)


def group_entries(broker: BrokerParts, group_id: str) -> list[ConfigEntry]:
    """A group's configs (KIP-848), in name order: GROUP_CONFIG where the group sets one,
    else the broker's value (its synonym) as the default, as Kafka describes them."""
    overrides = broker.image.group_configs.get(group_id, {})
    entries = []
    for name, key in sorted(GROUP_CONFIGS.items()):
        synonym = key.synonyms[0][0]
        default = broker.config.get(synonym)
        value, source = ((overrides[name], ConfigSource.GROUP_CONFIG) if name in overrides
                         else (default, ConfigSource.DEFAULT_CONFIG))
        synonyms = [Synonym(name, overrides[name], ConfigSource.GROUP_CONFIG)] \
            if name in overrides else []
        synonyms.append(Synonym(synonym, default, ConfigSource.DEFAULT_CONFIG))
        entries.append(ConfigEntry(key, value, source, read_only=False, synonyms=synonyms))
    return entries


def check_group(name: str) -> None:
    if not name:
        raise ControllerError(ErrorCode.INVALID_REQUEST, "Group name can't be empty.")


def check_group_value(broker: BrokerParts, name: str, value: str | None) -> None:
    """A group's session timeout and heartbeat interval stay within the broker's bounds
    (group.consumer.min/max.*), as Kafka's GroupConfig validation requires."""
    if value is None:
        return
    key = GROUP_CONFIGS[name]
    synonym = key.synonyms[0][0]
    low = broker.config.get_int(synonym.replace(".consumer.", ".consumer.min."))
    high = broker.config.get_int(synonym.replace(".consumer.", ".consumer.max."))
    try:
        number = int(value)
    except ValueError:
        raise ControllerError(ErrorCode.INVALID_CONFIG,
                              f"Invalid value {value} for configuration {name}: "
                              f"Not a number of type INT") from None
    if not low <= number <= high:
        raise ControllerError(ErrorCode.INVALID_CONFIG,
                              f"Invalid value {value} for configuration {name}: "
                              f"must be between {low} and {high}")


def check_topic(broker: BrokerParts, name: str) -> None:
    """ControllerError unless `name` is a legal, existing topic."""
    validate_topic_name(name)
    if name not in broker.image.topics:
        raise ControllerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              f"The topic '{name}' does not exist.")


def check_broker(broker: BrokerParts, name: str) -> None:
    """ControllerError unless `name` is this broker's id or "" (the cluster-wide default)."""
    if name == "":
        return
    try:
        node_id = int(name)
    except ValueError:
        raise ControllerError(
            ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}"
        ) from None
    if node_id != broker.node_id:
        raise ControllerError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {broker.node_id} or empty string, but received {name}",
        )


def unsupported_resource(resource_type: int) -> ControllerError:
    try:
        label = ResourceType(resource_type).name
    except ValueError:
        label = str(resource_type)
    return ControllerError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {label}")


def check_authorized(broker: BrokerParts, ctx: RequestContext, resource_type: int, name: str,
                     operation: AclOperation) -> None:
    """Kafka's rule for the config APIs: `operation` (DESCRIBE_CONFIGS or ALTER_CONFIGS) on
    the topic or the group, or on the cluster for a broker resource."""
    authorizer = broker.authorizer
    if resource_type == ResourceType.TOPIC:
        if not authorizer.authorize_topic(ctx, operation, name):
            raise ControllerError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
    elif resource_type == ResourceType.GROUP:
        if not authorizer.authorize_group(ctx, operation, name):
            raise ControllerError(ErrorCode.GROUP_AUTHORIZATION_FAILED, "Authorization failed.")
    elif not authorizer.authorize_cluster(ctx, operation):
        raise ControllerError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                              "Cluster authorization failed.")


# Alter one resource: (broker, resource, validate_only); raises ControllerError to refuse it.
AlterOne = Callable[["BrokerParts", Any, bool], Awaitable[None]]


async def alter_each(
    broker: BrokerParts, ctx: RequestContext, request: Any, response_class: Any,
    alter: AlterOne,
) -> Any:
    """The response of AlterConfigs or IncrementalAlterConfigs: every resource altered on
    its own, and a resource named twice in one request refused."""
    seen = Counter((r.resource_type, r.resource_name) for r in request.resources)
    results = []
    for resource in request.resources:
        code, message = ErrorCode.NONE, None
        try:
            if seen[(resource.resource_type, resource.resource_name)] > 1:
                raise ControllerError(ErrorCode.INVALID_REQUEST, "Duplicate resource.")
            check_authorized(broker, ctx, resource.resource_type, resource.resource_name,
                             AclOperation.ALTER_CONFIGS)
            await alter(broker, resource, request.validate_only)
        except ControllerError as exc:
            code, message = exc.error_code, exc.message
        results.append(response_class.AlterConfigsResourceResponse(
            error_code=code, error_message=message, resource_type=resource.resource_type,
            resource_name=resource.resource_name,
        ))
    return response_class(throttle_time_ms=0, responses=results)


@dataclass(frozen=True)
class AlterTarget:
    """A resource an alter API changes: a topic's overrides or a broker resource's dynamic
    configs ("" the cluster-wide default, or this broker's id)."""

    resource_type: ResourceType
    name: str
    current: dict[str, str]

    @property
    def keys(self) -> dict[str, ConfigKey]:
        return {ResourceType.TOPIC: TOPIC_CONFIGS,
                ResourceType.GROUP: GROUP_CONFIGS}.get(self.resource_type, BROKER_CONFIGS)

    def unknown(self, name: str) -> ControllerError:
        if self.resource_type is ResourceType.TOPIC:
            return ControllerError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
        if self.resource_type is ResourceType.GROUP:
            return ControllerError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {name}")
        return ControllerError(ErrorCode.INVALID_CONFIG,
                               f"Cannot update these configs dynamically: {name}")

    def value_without_override(self, broker: BrokerParts, name: str) -> str:
        """What `name` reads as once this resource's override is gone (APPEND's base)."""
        if self.resource_type is ResourceType.TOPIC:
            return broker.config.topic_default(name)[0] or ""
        if self.resource_type is ResourceType.GROUP:
            return broker.config.get(GROUP_CONFIGS[name].synonyms[0][0]) or ""
        return broker.config.broker_value(name)[0] or ""

    async def alter(self, broker: BrokerParts, changes: dict[str, str | None],
                    validate_only: bool) -> None:
        if self.resource_type is ResourceType.TOPIC:
            await broker.controller.alter_topic_configs(self.name, changes,
                                                        validate_only=validate_only)
        elif self.resource_type is ResourceType.GROUP:
            for name, value in changes.items():
                if name in GROUP_CONFIGS:
                    check_group_value(broker, name, value)
            await broker.controller.alter_group_configs(self.name, changes,
                                                        validate_only=validate_only)
        else:
            await broker.controller.alter_broker_configs(self.name, changes,
                                                         validate_only=validate_only)


def alter_target(broker: BrokerParts, resource: Any) -> AlterTarget:
    """Checks shared by both alter APIs: a topic must exist, a broker resource must be this
    broker or "", and each config may be named at most once."""
    name = resource.resource_name
    if resource.resource_type == ResourceType.BROKER:
        check_broker(broker, name)
        name = name and str(broker.node_id)  # "01" names broker 1 too
        target = AlterTarget(ResourceType.BROKER, name,
                             dict(broker.image.broker_configs.get(name, {})))
    elif resource.resource_type == ResourceType.TOPIC:
        check_topic(broker, name)
        target = AlterTarget(ResourceType.TOPIC, name, dict(broker.image.topics[name].configs))
    elif resource.resource_type == ResourceType.GROUP:
        check_group(name)
        target = AlterTarget(ResourceType.GROUP, name,
                             dict(broker.image.group_configs.get(name, {})))
    else:
        raise unsupported_resource(resource.resource_type)
    names = [c.name for c in resource.configs]
    duplicates = sorted(n for n, count in Counter(names).items() if count > 1)
    if duplicates:
        raise ControllerError(ErrorCode.INVALID_REQUEST,
                              f"Error due to duplicate config keys: {', '.join(duplicates)}")
    return target
