"""Config entries of topics and brokers, and the changes made to them, as typed values."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from confluent_kafka.admin import ConfigSource


class ResourceKind(StrEnum):
    TOPIC = "topic"
    BROKER = "broker"


class ConfigOperation(StrEnum):
    """IncrementalAlterConfigs' operations; DELETE resets the config to its default."""

    SET = "SET"
    DELETE = "DELETE"
    APPEND = "APPEND"
    SUBTRACT = "SUBTRACT"


@dataclass(frozen=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: str


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None  # as the broker sent it (None for a sensitive config)
    source: str  # Kafka's ConfigSource name: DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG, ...
    is_default: bool
    is_read_only: bool
    is_sensitive: bool
    synonyms: tuple[ConfigSynonym, ...] = ()


@dataclass(frozen=True)
class ConfigChange:
    name: str
    value: str | None = None
    operation: ConfigOperation = ConfigOperation.SET


def source_name(source: Any) -> str:
    try:
        return str(ConfigSource(source).name)
    except ValueError:
        return "UNKNOWN"


def entry_from_confluent(entry: Any) -> ConfigEntry:
    synonyms = tuple(ConfigSynonym(s.name, s.value, source_name(s.source))
                     for s in (entry.synonyms or {}).values())
    return ConfigEntry(entry.name, entry.value, source_name(entry.source),
                       bool(entry.is_default), bool(entry.is_read_only),
                       bool(entry.is_sensitive), synonyms)


@dataclass(frozen=True)
class AcksAllShortfall:
    """A topic with fewer replicas than its min.insync.replicas: acks=all writes all fail."""

    topic: str
    replication_factor: int
    min_insync_replicas: int

    @property
    def message(self) -> str:
        return (f"Topic {self.topic} has replication factor {self.replication_factor}, below "
                f"its min.insync.replicas ({self.min_insync_replicas}): every write with "
                "acks=all (the default of confluent-kafka and of the REST proxy) will fail "
                "with NOT_ENOUGH_REPLICAS. Recreate it with a replication factor of at least "
                f"{self.min_insync_replicas}, or set its min.insync.replicas to "
                f"{self.replication_factor}.")
