"""Moving replicas (KIP-455): AlterPartitionReassignments and ListPartitionReassignments.

Pure functions of the image, like `elections`. A reassignment starts by widening the
partition: `replicas` becomes the target followed by the current replicas not in it,
`adding_replicas` the target replicas that are new, `removing_replicas` the current ones
that are not in the target. The new replicas then fetch like any follower, and the leader
adds them to the ISR through AlterPartition. The change that brings the last target
replica into the ISR completes the reassignment: `replicas` becomes the target, the ISR
drops the removed replicas, and a leader being removed hands over
(`elections.partition_change` does this for every change). Cancelling reverts to the
replicas before the reassignment.
"""

from __future__ import annotations

from collections.abc import Iterable

from brokercore.protocol.errors import ErrorCode
from brokercore.topic_partition import TopicPartition

from . import elections
from .elections import Rejected
from .image import MetadataImage, PartitionRegistration, TopicImage
from .records import MetadataRecord, PartitionChangeRecord

Reassignment = tuple[list[int], list[int], list[int]]  # replicas, adding, removing


def records_alter_partition_reassignments(
    image: MetadataImage, changes: dict[TopicPartition, list[int] | None]
) -> tuple[list[MetadataRecord], dict[TopicPartition, Rejected | None]]:
    """Start (a list of target replicas) or cancel (None) reassignments. A new target for a
    partition already being reassigned starts from its current, widened replicas."""
    records: list[MetadataRecord] = []
    results: dict[TopicPartition, Rejected | None] = {}
    # Each record is decided on the image as it stands: one record per partition, so the
    # changes don't interact.
    for tp, target in changes.items():
        try:
            topic, part = _partition(image, tp)
            if target is None:
                record = _cancel(image, topic, tp.partition, part)
            else:
                _validate_target(image, target)
                record = _start(image, topic, tp.partition, part, target)
        except Rejected as exc:
            results[tp] = exc
            continue
        if record is not None:
            records.append(record)
        results[tp] = None
    return records, results


def list_partition_reassignments(
    image: MetadataImage, tps: Iterable[TopicPartition] | None
) -> dict[TopicPartition, Reassignment]:
    """The partitions being reassigned, among `tps` (None: all). Unknown partitions and
    those not being reassigned are left out, as Kafka's response has no error for them."""
    found: dict[TopicPartition, Reassignment] = {}
    if tps is None:
        tps = [TopicPartition(t.name, i) for t, i, _ in elections.partitions(image)]
    for tp in tps:
        topic = image.topics.get(tp.topic)
        part = topic.partitions.get(tp.partition) if topic is not None else None
        if part is not None and in_progress(part):
            found[tp] = (list(part.replicas), list(part.adding_replicas),
                         list(part.removing_replicas))
    return found


def in_progress(part: PartitionRegistration) -> bool:
    return bool(part.adding_replicas or part.removing_replicas)


def _partition(
    image: MetadataImage, tp: TopicPartition
) -> tuple[TopicImage, PartitionRegistration]:
    topic = image.topics.get(tp.topic)
    part = topic.partitions.get(tp.partition) if topic is not None else None
    if topic is None or part is None:
        raise Rejected(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                       "The topic or partition does not exist on this broker.")
    return topic, part


def _validate_target(image: MetadataImage, target: list[int]) -> None:
    def invalid(message: str) -> Rejected:
        return Rejected(ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)

    if not target:
        raise invalid("The manual partition assignment includes an empty replica list.")
    if len(set(target)) != len(target):
        raise invalid(f"The manual partition assignment {target} includes a duplicate replica.")
    for broker in target:
        if broker not in image.brokers:
            raise invalid(f"The manual partition assignment includes broker {broker}, "
                          "but no such broker is registered.")


def _start(image: MetadataImage, topic: TopicImage, index: int, part: PartitionRegistration,
           target: list[int]) -> PartitionChangeRecord | None:
    current = part.replicas
    return elections.partition_change(
        topic, index, part, elections.live_brokers(image),
        replicas=target + [r for r in current if r not in target],
        adding_replicas=[r for r in target if r not in current],
        removing_replicas=[r for r in current if r not in target],
    )


def _cancel(image: MetadataImage, topic: TopicImage, index: int,
            part: PartitionRegistration) -> PartitionChangeRecord | None:
    if not in_progress(part):
        raise Rejected(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                       f"No ongoing reassignment for {topic.name}-{index}.")
    replicas = [r for r in part.replicas if r not in part.adding_replicas]
    isr = [r for r in part.isr if r not in part.adding_replicas]
    if not isr:
        # Only new replicas were in sync: keep one of the old ones, knowing that this is an
        # unclean choice, rather than leave an ISR no replica is in.
        isr = replicas[:1]
    return elections.partition_change(
        topic, index, part, elections.live_brokers(image),
        replicas=replicas, isr=isr, adding_replicas=[], removing_replicas=[],
    )
