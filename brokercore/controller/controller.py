"""The controller: decides metadata changes and writes them as records.

Every change goes through one method here that validates a request against the current
image, produces records, appends them to the metadata log and then applies them
(`MetadataImage.apply`). Listeners (the broker's replica manager) learn of each applied
record. Methods are coroutines so that a replicated quorum can sit underneath unchanged.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from brokercore.config import TOPIC_CONFIGS, BrokerConfig, ConfigError, validate_value
from brokercore.protocol.errors import ErrorCode

from .image import MetadataImage, Record
from .log import MetadataLog

log = logging.getLogger(__name__)

LEGAL_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME_LENGTH = 249
PRODUCER_ID_BLOCK = 1000
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


class ControllerError(Exception):
    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


def validate_topic_name(name: str) -> None:
    if not name or name in (".", ".."):
        raise ControllerError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic name {name!r} is illegal")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise ControllerError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters",
        )
    if not LEGAL_TOPIC_NAME.match(name):
        raise ControllerError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name {name!r} is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'",
        )


@dataclass
class NewTopic:
    name: str
    num_partitions: int = -1  # -1: the broker's num.partitions
    replication_factor: int = -1  # -1: default.replication.factor
    assignments: dict[int, list[int]] = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)


Listener = Callable[[Record], None]


class Controller:
    def __init__(self, config: BrokerConfig, metadata_dir: Path) -> None:
        self.config = config
        self.log = MetadataLog(metadata_dir)
        self.image = MetadataImage()
        self.listeners: list[Listener] = []
        self._next_producer_id = 2**63  # forces a fresh block on first use
        for offset, record in enumerate(self.log.records):
            self.image.apply(record, offset)
        if self.image.cluster_id is None:
            cluster_id = config.get("cluster.id") or _random_cluster_id()
            self._commit([{"type": "cluster", "cluster_id": cluster_id}])

    @property
    def node_id(self) -> int:
        return self.config.node_id

    def _commit(self, records: list[Record]) -> None:
        first = self.log.append(records)
        for i, record in enumerate(records):
            self.image.apply(record, first + i)
            for listener in self.listeners:
                listener(record)

    async def register_broker(self, node_id: int, host: str, port: int) -> None:
        current = self.image.brokers.get(node_id)
        epoch = current.epoch + 1 if current else 0
        self._commit([{"type": "broker", "node_id": node_id, "host": host, "port": port,
                       "fenced": False, "epoch": epoch}])

    # -- topics ---------------------------------------------------------------------------
    async def create_topics(
        self, topics: list[NewTopic], *, validate_only: bool = False
    ) -> list[tuple[NewTopic, ControllerError | None]]:
        results: list[tuple[NewTopic, ControllerError | None]] = []
        for topic in topics:
            try:
                records = self._topic_records(topic)
            except ControllerError as exc:
                results.append((topic, exc))
                continue
            if not validate_only:
                self._commit(records)
                log.info("created topic %s with %d partitions", topic.name, topic.num_partitions)
            results.append((topic, None))
        return results

    def _topic_records(self, topic: NewTopic) -> list[Record]:
        validate_topic_name(topic.name)
        if topic.name in self.image.topics:
            raise ControllerError(
                ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic.name}' already exists."
            )
        configs = self.validated_topic_configs(topic.configs)
        assignments = topic.assignments or self._assign(topic)
        topic.num_partitions = len(assignments)
        topic.replication_factor = len(next(iter(assignments.values())))
        topic.configs = configs
        topic_id = str(uuid.uuid4())
        records: list[Record] = [{"type": "topic", "name": topic.name, "topic_id": topic_id}]
        records += [
            {"type": "config", "resource": "topic", "name": topic.name, "key": k, "value": v}
            for k, v in configs.items()
        ]
        records += [self._partition_record(topic_id, p, r) for p, r in sorted(assignments.items())]
        return records

    def _partition_record(self, topic_id: str, partition: int, replicas: list[int]) -> Record:
        live = [b for b in replicas if self._is_live(b)]
        return {"type": "partition", "topic_id": topic_id, "partition": partition,
                "replicas": replicas, "isr": live, "leader": live[0] if live else -1,
                "leader_epoch": 0}

    def _is_live(self, node_id: int) -> bool:
        broker = self.image.brokers.get(node_id)
        return broker is not None and not broker.fenced

    def _assign(self, topic: NewTopic, first_partition: int = 0) -> dict[int, list[int]]:
        partitions = topic.num_partitions
        if partitions == -1:
            partitions = self.config.get_int("num.partitions")
        rf = topic.replication_factor
        if rf == -1:
            rf = self.config.get_int("default.replication.factor")
        if partitions <= 0:
            raise ControllerError(ErrorCode.INVALID_PARTITIONS,
                                  "Number of partitions must be larger than 0.")
        if rf <= 0:
            raise ControllerError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                  "Replication factor must be larger than 0.")
        brokers = sorted(b for b in self.image.brokers if self._is_live(b))
        if rf > len(brokers):
            raise ControllerError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {rf} time(s): The target replication factor "
                f"of {rf} cannot be reached because only {len(brokers)} broker(s) are registered.",
            )
        return {
            p: [brokers[(p + i) % len(brokers)] for i in range(rf)]
            for p in range(first_partition, first_partition + partitions)
        }

    def validated_topic_configs(self, configs: dict[str, str]) -> dict[str, str]:
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

    async def delete_topic(self, name: str) -> None:
        topic = self.image.topics.get(name)
        if topic is None:
            raise ControllerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                  "This server does not host this topic-partition.")
        if not self.config.get_bool("delete.topic.enable"):
            raise ControllerError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
        self._commit([{"type": "remove_topic", "topic_id": topic.topic_id, "name": name}])
        log.info("deleted topic %s", name)

    async def create_partitions(
        self, name: str, count: int, *, validate_only: bool,
        assignments: list[list[int]] | None = None,
    ) -> None:
        """Grow a topic to `count` partitions, placed by us or by `assignments` (new ones only)."""
        topic = self.image.topics.get(name)
        if topic is None:
            raise ControllerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                  f"The topic '{name}' does not exist.")
        current = len(topic.partitions)
        if count <= current:
            raise ControllerError(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {current} partitions, which is higher than the requested "
                f"{count}." if count < current else f"Topic already has {current} partitions.",
            )
        rf = len(topic.partitions[0].replicas)
        if assignments is None:
            placed = self._assign(NewTopic(name, count - current, rf), first_partition=current)
        else:
            placed = self._manual_new_partitions(current, count, assignments, rf)
        if not validate_only:
            self._commit([self._partition_record(topic.topic_id, p, r)
                          for p, r in sorted(placed.items())])

    def _manual_new_partitions(
        self, current: int, count: int, assignments: list[list[int]], rf: int
    ) -> dict[int, list[int]]:
        if len(assignments) != count - current:
            raise ControllerError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Attempted to add {count - current} additional partition(s), but only "
                f"{len(assignments)} assignment(s) were specified.",
            )
        placed = {current + i: list(replicas) for i, replicas in enumerate(assignments)}
        self.validate_manual_assignment(placed, first_partition=current, replication_factor=rf)
        return placed

    def validate_manual_assignment(
        self, assignments: dict[int, list[int]], *, first_partition: int = 0,
        replication_factor: int | None = None,
    ) -> None:
        """INVALID_REPLICA_ASSIGNMENT unless the partitions follow on from `first_partition`
        and each names distinct, registered brokers, as many for every partition."""
        expected = list(range(first_partition, first_partition + len(assignments)))
        if sorted(assignments) != expected:
            raise ControllerError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Partitions should be a consecutive sequence starting at {first_partition}, "
                f"but got {sorted(assignments)}.",
            )
        for replicas in assignments.values():
            self._check_replicas(replicas, replication_factor)
            replication_factor = len(replicas)

    def _check_replicas(self, replicas: list[int], replication_factor: int | None) -> None:
        def invalid(message: str) -> ControllerError:
            return ControllerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)

        if not replicas:
            raise invalid("The manual partition assignment includes an empty replica list.")
        for broker in replicas:
            if replicas.count(broker) > 1:
                raise invalid(f"The manual partition assignment includes the broker {broker} "
                              "more than once.")
            if broker not in self.image.brokers:
                raise invalid(f"The manual partition assignment includes broker {broker}, "
                              "but no such broker is registered.")
        if replication_factor is not None and len(replicas) != replication_factor:
            raise invalid(
                f"The manual partition assignment includes a partition with {len(replicas)} "
                f"replica(s), but this is not consistent with previous partitions, which have "
                f"{replication_factor} replica(s)."
            )

    # -- producer ids ---------------------------------------------------------------------
    async def allocate_producer_id(self) -> int:
        """A producer id never handed out before, even across restarts.

        Ids come from blocks recorded in the metadata log (KRaft's AllocateProducerIds), so a
        restart skips the rest of the block instead of reusing ids.
        """
        if self._next_producer_id >= self.image.producer_id_block_end:
            start = self.image.producer_id_block_end
            self._commit([{"type": "producer_ids", "block_end": start + PRODUCER_ID_BLOCK}])
            self._next_producer_id = start
        producer_id = self._next_producer_id
        self._next_producer_id += 1
        return producer_id

    # -- configs --------------------------------------------------------------------------
    async def alter_topic_configs(
        self, name: str, changes: dict[str, str | None], *, validate_only: bool
    ) -> None:
        """Set (or with None, delete) topic config overrides."""
        if name not in self.image.topics:
            raise ControllerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                  f"The topic '{name}' does not exist.")
        to_set = self.validated_topic_configs({k: v for k, v in changes.items() if v is not None})
        for key in changes:
            if key not in TOPIC_CONFIGS:
                raise ControllerError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {key}")
        if validate_only:
            return
        self._commit([
            {"type": "config", "resource": "topic", "name": name, "key": k,
             "value": to_set.get(k)}
            for k in changes
        ])

    def close(self) -> None:
        self.log.close()


def _random_cluster_id() -> str:
    """A Kafka-style cluster id: a UUID in URL-safe base64 without padding (22 characters)."""
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
