"""Config decisions: validating topic overrides and the records that change them."""

from __future__ import annotations

from brokercore.config import TOPIC_CONFIGS, ConfigError, validate_value
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
