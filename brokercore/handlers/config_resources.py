"""Config resources as the config APIs see them: every key with value, source and synonyms.

DescribeConfigs, CreateTopics v5 and the two AlterConfigs APIs share this view, so a value
reads the same whichever API reports it. Topic values come from the replica manager (the
override, else the broker synonym, else Kafka's default); broker values from the static
broker config. Dynamic broker configs are not supported, so BROKER resources are read-only.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from brokercore.config import BROKER_CONFIGS, TOPIC_CONFIGS, ConfigKey, ConfigSource, ConfigType
from brokercore.controller.controller import ControllerError, validate_topic_name
from brokercore.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from brokercore.handlers.parts import BrokerParts


class ResourceType(enum.IntEnum):
    """Kafka's ConfigResource.Type codes."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8


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
    explicit = broker.config.explicit
    for name, _scale in key.synonyms:
        if name in explicit:
            synonyms.append(Synonym(name, explicit[name], ConfigSource.STATIC_BROKER_CONFIG))
    # The default is reported under the broker key that carries it (log.retention.hours=168).
    defaulted = [name for name, _ in key.synonyms if BROKER_CONFIGS[name].default is not None]
    if defaulted:
        name = defaulted[-1]
        synonyms.append(Synonym(name, BROKER_CONFIGS[name].default, ConfigSource.DEFAULT_CONFIG))
    else:
        synonyms.append(Synonym(key.name, key.default, ConfigSource.DEFAULT_CONFIG))
    return synonyms


def broker_entries(broker: BrokerParts) -> list[ConfigEntry]:
    """Every broker config of this broker, in name order."""
    entries = []
    for name, key in sorted(BROKER_CONFIGS.items()):
        value, source = broker.config.broker_value(name)
        if name in ("node.id", "broker.id"):
            value = str(broker.node_id)
        elif name == "cluster.id" and value is None:
            value = broker.image.cluster_id
        synonyms = []
        if source is ConfigSource.STATIC_BROKER_CONFIG:
            synonyms.append(Synonym(name, value, source))
        if key.default is not None:
            synonyms.append(Synonym(name, key.default, ConfigSource.DEFAULT_CONFIG))
        entries.append(ConfigEntry(key, value, source, read_only=True, synonyms=synonyms))
    return entries


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


def broker_alter_error(names: list[str]) -> ControllerError:
    """The answer to any change of a broker config: this broker has no dynamic configs."""
    read_only = sorted(n for n in names if n not in BROKER_CONFIGS or BROKER_CONFIGS[n].read_only)
    if read_only:
        return ControllerError(ErrorCode.INVALID_CONFIG,
                               f"Cannot update these configs dynamically: {', '.join(read_only)}")
    return ControllerError(
        ErrorCode.INVALID_CONFIG,
        "Cannot update these configs dynamically: "
        f"{', '.join(sorted(names))} (this broker reads its configs at startup only; "
        "set them in server.properties or with --override)",
    )


def unsupported_resource(resource_type: int) -> ControllerError:
    try:
        label = ResourceType(resource_type).name
    except ValueError:
        label = str(resource_type)
    return ControllerError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {label}")


# Alter one resource: (broker, resource, validate_only); raises ControllerError to refuse it.
AlterOne = Callable[["BrokerParts", Any, bool], Awaitable[None]]


async def alter_each(
    broker: BrokerParts, request: Any, response_class: Any, alter: AlterOne
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
            await alter(broker, resource, request.validate_only)
        except ControllerError as exc:
            code, message = exc.error_code, exc.message
        results.append(response_class.AlterConfigsResourceResponse(
            error_code=code, error_message=message, resource_type=resource.resource_type,
            resource_name=resource.resource_name,
        ))
    return response_class(throttle_time_ms=0, responses=results)


def alterable_topic(broker: BrokerParts, resource: Any) -> bool:
    """Checks shared by both alter APIs; False when there is nothing to change.

    Broker resources accept only an empty change (there are no dynamic broker configs);
    a topic must exist and name each config at most once.
    """
    names = [c.name for c in resource.configs]
    if resource.resource_type == ResourceType.BROKER:
        check_broker(broker, resource.resource_name)
        if names:
            raise broker_alter_error(names)
        return False
    if resource.resource_type != ResourceType.TOPIC:
        raise unsupported_resource(resource.resource_type)
    check_topic(broker, resource.resource_name)
    duplicates = sorted(n for n, count in Counter(names).items() if count > 1)
    if duplicates:
        raise ControllerError(ErrorCode.INVALID_REQUEST,
                              f"Error due to duplicate config keys: {', '.join(duplicates)}")
    return True
