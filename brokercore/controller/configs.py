"""Config decisions: validating topic overrides and the records that change them."""

from __future__ import annotations

from brokercore.config import (
    BROKER_CONFIGS,
    DYNAMIC_BROKER_CONFIGS,
    GROUP_CONFIGS,
    TOPIC_CONFIGS,
    ConfigError,
    validate_value,
)
from brokercore.protocol.errors import ErrorCode

from .errors import ControllerError
from .image import MetadataImage
from .records import ConfigRecord


def validated_topic_configs(configs: dict[str, str]) -> dict[str, str]:
    validated = {}
    for name, value in configs.items():
        key = TOPIC_CONFIGS.get(name)
        if key is None:
            raise ControllerError(ErrorCode.INVALID_CONFIG,
                                  f"Unknown topic config name: {name}")
        try:
            validated[name] = validate_value(key, value)
        except ConfigError as exc:
            raise ControllerError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    return validated


def topic_config_records(
    image: MetadataImage, name: str, changes: dict[str, str | None]
) -> list[ConfigRecord]:
    """The records setting (or, for None, deleting) `name`'s overrides, checked first."""
    if name not in image.topics:
        raise ControllerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              f"The topic '{name}' does not exist.")
    to_set = validated_topic_configs({k: v for k, v in changes.items() if v is not None})
    for key in changes:
        if key not in TOPIC_CONFIGS:
            raise ControllerError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {key}")
    return [ConfigRecord("topic", name, k, to_set.get(k)) for k in changes]


def broker_config_records(name: str, changes: dict[str, str | None]) -> list[ConfigRecord]:
    """The records setting (or, for None, deleting) dynamic broker configs of `name` ("" the
    cluster-wide default, else a node id); only Kafka's dynamic keys may change."""
    static = sorted(key for key in changes if key not in DYNAMIC_BROKER_CONFIGS)
    if static:
        raise ControllerError(ErrorCode.INVALID_CONFIG,
                              f"Cannot update these configs dynamically: {', '.join(static)}")
    records = []
    for key, value in changes.items():
        if value is not None:
            try:
                value = validate_value(BROKER_CONFIGS[key], value)
            except ConfigError as exc:
                raise ControllerError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        records.append(ConfigRecord("broker", name, key, value))
    return records


def group_config_records(name: str, changes: dict[str, str | None]) -> list[ConfigRecord]:
    """The records setting (or, for None, deleting) a group's configs, checked first (the
    bounds, which are broker configs, are checked by the broker that takes the request)."""
    if not name:
        raise ControllerError(ErrorCode.INVALID_REQUEST, "Group name can't be empty.")
    records = []
    for key, value in changes.items():
        config = GROUP_CONFIGS.get(key)
        if config is None:
            raise ControllerError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {key}")
        if value is not None:
            try:
                value = validate_value(config, value)
            except ConfigError as exc:
                raise ControllerError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        records.append(ConfigRecord("group", name, key, value))
    return records
