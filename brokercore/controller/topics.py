"""Topic decisions: names, placement and the records that create topics and partitions.

`TopicDecisions` reads the image and the broker config and returns records or raises
ControllerError; the controller proposes what it returns. Nothing here writes.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field

from brokercore.config import BrokerConfig
from brokercore.protocol.errors import ErrorCode

from .configs import validated_topic_configs
from .errors import ControllerError
from .image import MetadataImage
from .records import ConfigRecord, MetadataRecord, PartitionRecord, TopicRecord

LEGAL_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME_LENGTH = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


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


class TopicDecisions:
    def __init__(self, config: BrokerConfig, image: MetadataImage) -> None:
        self.config = config
        self.image = image

    def topic_records(self, topic: NewTopic) -> list[MetadataRecord]:
        validate_topic_name(topic.name)
        if topic.name in self.image.topics:
            raise ControllerError(
                ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic.name}' already exists."
            )
        configs = validated_topic_configs(topic.configs)
        assignments = topic.assignments or self.assign(topic)
        topic.num_partitions = len(assignments)
        topic.replication_factor = len(next(iter(assignments.values())))
        topic.configs = configs
        topic_id = str(uuid.uuid4())
        records: list[MetadataRecord] = [TopicRecord(topic.name, topic_id)]
        records += [ConfigRecord("topic", topic.name, k, v) for k, v in configs.items()]
        records += [self.partition_record(topic_id, p, r) for p, r in sorted(assignments.items())]
        return records

    def partition_record(self, topic_id: str, partition: int,
                         replicas: list[int]) -> PartitionRecord:
        live = [b for b in replicas if self._is_live(b)]
        return PartitionRecord(topic_id, partition, tuple(replicas), tuple(live),
                               live[0] if live else -1)

    def _is_live(self, node_id: int) -> bool:
        broker = self.image.brokers.get(node_id)
        return broker is not None and not broker.fenced

    def assign(self, topic: NewTopic, first_partition: int = 0) -> dict[int, list[int]]:
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

    def manual_new_partitions(
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
