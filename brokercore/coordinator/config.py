"""The group coordinator's settings, read once from the broker's config.

Kafka's GroupCoordinatorConfig: the classic protocol's session and rebalance bounds, offset
retention and commit timeout, and KIP-848's session, heartbeat, assignors and group size.
A KIP-848 timeout outside its own min and max, or an unknown assignor, stops the broker at
startup, as in Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass

from brokercore.config import BrokerConfig, ConfigError

from .assignors import ASSIGNORS


@dataclass(frozen=True)
class CoordinatorConfig:
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    max_size: int = 2**31 - 1
    offsets_retention_ms: int = 10080 * 60_000
    retention_check_interval_ms: int = 600_000
    metadata_max_bytes: int = 4096
    commit_timeout_ms: int = 5000
    consumer_session_timeout_ms: int = 45000
    consumer_heartbeat_interval_ms: int = 5000
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    consumer_max_size: int = 2**31 - 1
    # group.consumer.migration.policy: which online conversions of groups with members
    # are allowed (a classic member may always join a consumer group).
    upgrade_enabled: bool = True
    downgrade_enabled: bool = True

    @classmethod
    def from_broker(cls, config: BrokerConfig) -> CoordinatorConfig:
        for name in ("session.timeout.ms", "heartbeat.interval.ms"):
            _check_range(config, f"group.consumer.{name}")
        return cls(
            initial_rebalance_delay_ms=config.get_int("group.initial.rebalance.delay.ms"),
            min_session_timeout_ms=config.get_int("group.min.session.timeout.ms"),
            max_session_timeout_ms=config.get_int("group.max.session.timeout.ms"),
            max_size=config.get_int("group.max.size"),
            offsets_retention_ms=config.get_int("offsets.retention.minutes") * 60_000,
            retention_check_interval_ms=config.get_int("offsets.retention.check.interval.ms"),
            metadata_max_bytes=config.get_int("offset.metadata.max.bytes"),
            commit_timeout_ms=config.get_int("offsets.commit.timeout.ms"),
            consumer_session_timeout_ms=config.get_int("group.consumer.session.timeout.ms"),
            consumer_heartbeat_interval_ms=config.get_int(
                "group.consumer.heartbeat.interval.ms"),
            consumer_assignors=_assignors(config.get("group.consumer.assignors") or ""),
            consumer_max_size=config.get_int("group.consumer.max.size"),
            **_migration_policy(config.get("group.consumer.migration.policy") or ""),
        )


def _check_range(config: BrokerConfig, name: str) -> None:
    """Kafka refuses to start with a KIP-848 timeout outside its min and max."""
    low, high = (config.get_int(name.replace(".consumer.", f".consumer.{bound}."))
                 for bound in ("min", "max"))
    if not low <= config.get_int(name) <= high:
        raise ConfigError(f"{name} must be between {low} and {high}")


def _assignors(value: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in value.split(",") if n.strip())
    unknown = [n for n in names if n not in ASSIGNORS]
    if not names or unknown:
        raise ConfigError(f"group.consumer.assignors must list some of {sorted(ASSIGNORS)}, "
                          f"got {value!r}")
    return names


MIGRATION_POLICIES = {
    "bidirectional": (True, True), "upgrade": (True, False),
    "downgrade": (False, True), "disabled": (False, False),
}


def _migration_policy(value: str) -> dict[str, bool]:
    """Kafka's ConsumerGroupMigrationPolicy, named case-insensitively."""
    try:
        upgrade, downgrade = MIGRATION_POLICIES[value.strip().lower()]
    except KeyError:
        raise ConfigError(f"group.consumer.migration.policy must be one of "
                          f"{sorted(MIGRATION_POLICIES)}, got {value!r}") from None
    return {"upgrade_enabled": upgrade, "downgrade_enabled": downgrade}
