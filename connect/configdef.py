"""Connector configuration definitions and validation, in the shape of Kafka's `ConfigDef`:
each key has a type, a default (or none: required), an importance, documentation, a group,
and an optional validator; `validate()` answers per key with its value, recommended values
and errors, which the REST API renders as Kafka's `ConfigInfos`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class ConfigException(Exception):
    """A configuration that cannot be used (Kafka's ConfigException)."""


class Type(Enum):
    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    INT = "INT"
    SHORT = "SHORT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    LIST = "LIST"
    CLASS = "CLASS"
    PASSWORD = "PASSWORD"


class Importance(Enum):
    HIGH = "HIGH"
    MEDIUM = "MEDIUM"
    LOW = "LOW"


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()
Validator = Callable[[str, Any], None]  # raises ConfigException


def _parse_bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(value)
    return lowered == "true"


def _parse_list(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


_PARSERS: dict[Type, Callable[[str], Any]] = {
    Type.BOOLEAN: _parse_bool, Type.STRING: str, Type.INT: int, Type.SHORT: int,
    Type.LONG: int, Type.DOUBLE: float, Type.LIST: _parse_list, Type.CLASS: str,
    Type.PASSWORD: str,
}
_RANGES = {Type.INT: (-(2**31), 2**31 - 1), Type.SHORT: (-(2**15), 2**15 - 1),
           Type.LONG: (-(2**63), 2**63 - 1)}


def parse_value(key: ConfigKey, raw: Any) -> Any:
    if raw is None:
        return None
    if not isinstance(raw, str):
        raw = str(raw).lower() if isinstance(raw, bool) else str(raw)
    try:
        value = _PARSERS[key.type](raw)
    except ValueError:
        raise ConfigException(
            f"Invalid value {raw} for configuration {key.name}: Not a "
            f"{key.type.value.lower()}") from None
    low_high = _RANGES.get(key.type)
    if low_high and not low_high[0] <= value <= low_high[1]:
        raise ConfigException(f"Invalid value {raw} for configuration {key.name}: out of range")
    return value


def at_least(minimum: int) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is not None and value < minimum:
            raise ConfigException(
                f"Invalid value {value} for configuration {name}: Value must be at least "
                f"{minimum}")
    return check


def one_of(*allowed: str) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is not None and str(value).lower() not in {a.lower() for a in allowed}:
            raise ConfigException(
                f"Invalid value {value} for configuration {name}: String must be one of: "
                f"{', '.join(allowed)}")
    return check


def non_empty_string(name: str, value: Any) -> None:
    if value is not None and not str(value).strip():
        raise ConfigException(
            f"Invalid value {value} for configuration {name}: String may not be empty")


def as_text(value: Any) -> str | None:
    """A value as Kafka's REST answers show it: lists comma-joined, booleans lower case."""
    if value is None:
        return None
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: Type
    default: Any
    importance: Importance
    documentation: str
    group: str | None = None
    order: int = -1
    width: str = "NONE"
    display_name: str | None = None
    validator: Validator | None = None
    recommended: tuple[str, ...] = ()

    @property
    def required(self) -> bool:
        return self.default is NO_DEFAULT

    def definition(self) -> dict[str, Any]:
        """Kafka's ConfigKeyInfo."""
        return {
            "name": self.name, "type": self.type.value, "required": self.required,
            "default_value": None if self.required else as_text(self.default),
            "importance": self.importance.value, "documentation": self.documentation,
            "group": self.group, "width": self.width,
            "display_name": self.display_name or self.name, "dependents": [],
            "order": self.order,
        }


@dataclass
class ConfigValue:
    name: str
    value: Any
    recommended_values: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    visible: bool = True

    def info(self) -> dict[str, Any]:
        """Kafka's ConfigValueInfo: the value as the user wrote it."""
        return {"name": self.name, "value": as_text(self.value),
                "recommended_values": self.recommended_values, "errors": self.errors,
                "visible": self.visible}


class ConfigDef:
    def __init__(self, keys: Iterable[ConfigKey] = ()) -> None:
        self.keys: dict[str, ConfigKey] = {}
        for key in keys:
            self.keys[key.name] = key

    def define(self, name: str, type: Type, default: Any, importance: Importance,
               documentation: str, **extra: Any) -> ConfigDef:
        if name in self.keys:
            raise ConfigException(f"Configuration {name} is defined twice.")
        self.keys[name] = ConfigKey(name, type, default, importance, documentation, **extra)
        return self

    def merged(self, other: ConfigDef) -> ConfigDef:
        return ConfigDef([*self.keys.values(), *other.keys.values()])

    def parse(self, props: Mapping[str, Any]) -> dict[str, Any]:
        """Every defined key's value; raises the first problem as ConfigException."""
        for value in self.validate(props).values():
            if value.errors:
                raise ConfigException(value.errors[0])
        return {name: self._value(key, props) for name, key in self.keys.items()}

    def _value(self, key: ConfigKey, props: Mapping[str, Any]) -> Any:
        if key.name in props:
            return parse_value(key, props[key.name])
        return None if key.required else key.default

    def validate(self, props: Mapping[str, Any]) -> dict[str, ConfigValue]:
        results: dict[str, ConfigValue] = {}
        for name, key in self.keys.items():
            result = ConfigValue(name, props.get(name), list(key.recommended))
            results[name] = result
            if name not in props and key.required:
                result.errors.append(f"Missing required configuration \"{name}\" which has "
                                     "no default value.")
                continue
            try:
                value = self._value(key, props)
                if key.validator is not None:
                    key.validator(name, value)
            except ConfigException as exc:
                result.errors.append(str(exc))
        return results

    def groups(self) -> list[str]:
        seen: list[str] = []
        for key in self.keys.values():
            if key.group and key.group not in seen:
                seen.append(key.group)
        return seen
