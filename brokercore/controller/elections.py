"""Leadership decisions: the records a fence, an unfence, an ISR change or an election writes.

Every function here is pure. It reads a `MetadataImage` and a few facts the image does not
hold (the broker's default for `unclean.leader.election.enable`, the imbalance threshold),
and returns the records the active controller should write. Nothing here changes the image.
The controller writes the records, and the image changes when they are applied.

Every ISR or replica change goes through `partition_change`, as every change goes through
KRaft's PartitionChangeBuilder. It completes a reassignment whose target replicas are all in
the ISR, elects a leader, and bumps `leader_epoch` only when the leader changes.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Set

from brokercore.protocol.errors import ErrorCode
from brokercore.topic_partition import TopicPartition

from .image import MetadataImage, PartitionRegistration, TopicImage
from .records import FenceBrokerRecord, MetadataRecord, PartitionChangeRecord

UNCLEAN_KEY = "unclean.leader.election.enable"


class ElectionType(enum.IntEnum):
    """ElectLeaders' `election_type` (KIP-460)."""

    PREFERRED = 0
    UNCLEAN = 1


class Mode(enum.Enum):
    """How `partition_change` picks a leader."""

    ONLINE = "online"  # keep a good leader, else the first live ISR member in replica order
    PREFERRED = "preferred"  # the first replica if it is live and in the ISR
    UNCLEAN = "unclean"  # as ONLINE, else any live replica, which becomes the whole ISR


class Rejected(Exception):
    """A request the image rules out, with Kafka's error code for it.

    The controller turns it into a `ControllerError` (same code, same message)."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


# -- facts read off the image ---------------------------------------------------------------
def live_brokers(image: MetadataImage) -> set[int]:
    """Registered and unfenced: the brokers that may lead and join ISRs."""
    return {node_id for node_id, b in image.brokers.items() if not b.fenced}


def unclean_enabled(image: MetadataImage, topic: TopicImage, default: bool) -> bool:
    """The topic's `unclean.leader.election.enable`, else the cluster's dynamic value, else
    `default` (the broker's static config)."""
    value = topic.configs.get(UNCLEAN_KEY, image.broker_configs.get("", {}).get(UNCLEAN_KEY))
    if value is None:
        return default
    return str(value).strip().lower() == "true"


def partitions(image: MetadataImage) -> Iterator[tuple[TopicImage, int, PartitionRegistration]]:
    for topic in image.topics.values():
        for index, part in sorted(topic.partitions.items()):
            yield topic, index, part


# -- the one place that builds a partition_change -------------------------------------------
def partition_change(
    topic: TopicImage,
    index: int,
    part: PartitionRegistration,
    live: Set[int],
    *,
    mode: Mode = Mode.ONLINE,
    isr: list[int] | None = None,
    replicas: list[int] | None = None,
    adding_replicas: list[int] | None = None,
    removing_replicas: list[int] | None = None,
) -> PartitionChangeRecord | None:
    """The `partition_change` record taking `part` to the given fields, or None if nothing
    would change. Omitted fields keep their current value."""
    new_isr = list(part.isr if isr is None else isr)
    new_replicas = list(part.replicas if replicas is None else replicas)
    adding = list(part.adding_replicas if adding_replicas is None else adding_replicas)
    removing = list(part.removing_replicas if removing_replicas is None else removing_replicas)
    if adding or removing:
        target = [r for r in new_replicas if r not in removing]
        if all(r in new_isr for r in target):
            # Every target replica is in sync: the reassignment is done.
            new_replicas, adding, removing = target, [], []
            new_isr = [r for r in new_isr if r in target]
    leader, new_isr = _elect(new_replicas, new_isr, part.leader, live, mode)
    def changed(old: list[int], new: list[int]) -> tuple[int, ...] | None:
        return None if old == new else tuple(new)

    new_leader = leader != part.leader
    record = PartitionChangeRecord(
        topic.topic_id, index,
        replicas=changed(part.replicas, new_replicas), isr=changed(part.isr, new_isr),
        leader=leader if new_leader else None,
        leader_epoch=part.leader_epoch + 1 if new_leader else None,
        adding_replicas=changed(part.adding_replicas, adding),
        removing_replicas=changed(part.removing_replicas, removing),
    )
    return None if record == PartitionChangeRecord(topic.topic_id, index) else record


def _elect(
    replicas: list[int], isr: list[int], current: int, live: Set[int], mode: Mode
) -> tuple[int, list[int]]:
    def acceptable(r: int) -> bool:
        return r in live and r in isr

    if mode is Mode.PREFERRED and replicas and acceptable(replicas[0]):
        return replicas[0], isr
    if current in replicas and acceptable(current):
        return current, isr
    for r in replicas:
        if acceptable(r):
            return r, isr
    if mode is Mode.UNCLEAN:
        for r in replicas:
            if r in live:
                return r, [r]  # whatever it has is now the committed log
    return -1, isr


def _online_mode(image: MetadataImage, topic: TopicImage, unclean_default: bool) -> Mode:
    return Mode.UNCLEAN if unclean_enabled(image, topic, unclean_default) else Mode.ONLINE


# -- broker lifecycle -----------------------------------------------------------------------
def records_fence_broker(
    image: MetadataImage, node_id: int, *, unclean_default: bool = False
) -> list[MetadataRecord]:
    """Fence `node_id`: a `fence_broker` record, then one change per partition it was in the
    ISR of or led. It leaves each ISR unless it is the last member (the last member's log is
    the only one known complete). A partition it led gets the first live ISR member in
    replica order, else an unclean leader where allowed, else leader -1.
    Empty if the broker is unknown or already fenced."""
    broker = image.brokers.get(node_id)
    if broker is None or broker.fenced:
        return []
    records: list[MetadataRecord] = [FenceBrokerRecord(node_id, True)]
    return records + _records_without(image, node_id, unclean_default)


def records_controlled_shutdown(
    image: MetadataImage, node_id: int, *, unclean_default: bool = False
) -> list[MetadataRecord]:
    """A broker asked to shut down: its leaderships move to other live ISR members and it is
    fenced, all in one batch, so `shutdown_ready` can follow its commit. A partition with no
    other live ISR member goes to leader -1 (or unclean, where allowed), as when it dies."""
    return records_fence_broker(image, node_id, unclean_default=unclean_default)


def records_offline_replicas(
    image: MetadataImage, node_id: int, offline: Set[TopicPartition], *,
    unclean_default: bool = False,
) -> list[MetadataRecord]:
    """A live broker's replicas of `offline` are on a failed log dir (KIP-858): as when it
    is fenced, but for those partitions only. It leaves their ISRs unless it is the last
    member, and their leaderships move to another live ISR member, else to none."""
    return _records_without(image, node_id, unclean_default, offline)


def _records_without(
    image: MetadataImage, node_id: int, unclean_default: bool,
    only: Set[TopicPartition] | None = None,
) -> list[MetadataRecord]:
    live = live_brokers(image) - {node_id}
    records: list[MetadataRecord] = []
    for topic, index, part in partitions(image):
        if node_id not in part.isr and part.leader != node_id:
            continue
        if only is not None and TopicPartition(topic.name, index) not in only:
            continue
        isr = [r for r in part.isr if r != node_id] or part.isr
        mode = _online_mode(image, topic, unclean_default)
        record = partition_change(topic, index, part, live, mode=mode, isr=isr)
        if record is not None:
            records.append(record)
    return records


def records_unfence_broker(
    image: MetadataImage, node_id: int, *, unclean_default: bool = False
) -> list[MetadataRecord]:
    """Leaders for leaderless partitions that `node_id` can lead once it is live: it is in
    their ISR, or unclean election is allowed and it is a replica. Only `partition_change`
    records: the caller writes the record that unfences the broker (`broker` on
    registration, `fence_broker` with `fenced: false` on a heartbeat) before them."""
    live = live_brokers(image) | {node_id}
    records: list[MetadataRecord] = []
    for topic, index, part in partitions(image):
        if part.leader != -1 or node_id not in part.replicas:
            continue
        mode = _online_mode(image, topic, unclean_default)
        record = partition_change(topic, index, part, live, mode=mode)
        if record is not None:
            records.append(record)
    return records


# -- AlterPartition (KIP-497) ---------------------------------------------------------------
def records_alter_partition(
    image: MetadataImage,
    topic_id: str,
    partition: int,
    leader_id: int,
    leader_epoch: int,
    partition_epoch: int,
    isr: list[int],
) -> list[MetadataRecord]:
    """Validate a leader's ISR change and return its record (none if the ISR is unchanged).
    The change may complete a reassignment, which can also move the leadership.
    Raises `Rejected` with FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, INELIGIBLE_REPLICA,
    INVALID_REQUEST or UNKNOWN_TOPIC_OR_PARTITION."""
    topic = image.topics_by_id.get(topic_id)
    part = topic.partitions.get(partition) if topic is not None else None
    if topic is None or part is None:
        raise Rejected(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                       f"Unknown partition {partition} of topic id {topic_id}.")
    where = f"{topic.name}-{partition}"
    if leader_id != part.leader or leader_epoch != part.leader_epoch:
        raise Rejected(
            ErrorCode.FENCED_LEADER_EPOCH,
            f"{where}: node {leader_id} at leader epoch {leader_epoch} is not the leader; "
            f"the leader is {part.leader} at epoch {part.leader_epoch}.",
        )
    if partition_epoch != part.partition_epoch:
        raise Rejected(
            ErrorCode.INVALID_UPDATE_VERSION,
            f"{where}: partition epoch {partition_epoch} is stale, "
            f"the current one is {part.partition_epoch}.",
        )
    if leader_id not in isr or len(set(isr)) != len(isr):
        raise Rejected(ErrorCode.INVALID_REQUEST,
                       f"{where}: the ISR {isr} must hold the leader and no duplicates.")
    live = live_brokers(image)
    ineligible = [r for r in isr if r not in part.replicas or r not in live]
    if ineligible:
        raise Rejected(ErrorCode.INELIGIBLE_REPLICA,
                       f"{where}: {ineligible} are fenced or not replicas, so can't join the ISR.")
    record = partition_change(topic, partition, part, live, isr=list(isr))
    return [] if record is None else [record]


# -- ElectLeaders and auto rebalance --------------------------------------------------------
def records_elect_leaders(
    image: MetadataImage,
    election_type: ElectionType,
    tps: Iterable[TopicPartition] | None,
) -> tuple[list[MetadataRecord], dict[TopicPartition, Rejected | None]]:
    """ElectLeaders (KIP-460). PREFERRED moves leadership to the first replica if it is live
    and in the ISR; UNCLEAN elects a leader for a leaderless partition, from outside the ISR
    if need be, whatever the topic's config says (the operator asked for it).
    `tps=None` means every partition, and then only partitions that needed an election
    appear in the results, as in Kafka."""
    live = live_brokers(image)
    records: list[MetadataRecord] = []
    results: dict[TopicPartition, Rejected | None] = {}
    elect_all = tps is None
    if tps is None:
        tps = [TopicPartition(t.name, i) for t, i, _ in partitions(image)]
    for tp in tps:
        try:
            record = _elect_one(image, election_type, tp, live)
        except Rejected as exc:
            if not (elect_all and exc.error_code == ErrorCode.ELECTION_NOT_NEEDED):
                results[tp] = exc
            continue
        records.append(record)
        results[tp] = None
    return records, results


def _elect_one(
    image: MetadataImage, election_type: ElectionType, tp: TopicPartition, live: Set[int]
) -> PartitionChangeRecord:
    topic = image.topics.get(tp.topic)
    part = topic.partitions.get(tp.partition) if topic is not None else None
    if topic is None or part is None:
        raise Rejected(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                       "The topic or partition does not exist on this broker.")
    if election_type == ElectionType.PREFERRED:
        preferred = part.replicas[0]
        if part.leader == preferred:
            raise Rejected(ErrorCode.ELECTION_NOT_NEEDED,
                           "The preferred replica is the leader already.")
        if preferred not in live or preferred not in part.isr:
            raise Rejected(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                           f"Failed to elect leader for partition {tp} under strategy "
                           "PreferredReplicaPartitionLeaderElectionStrategy")
        mode = Mode.PREFERRED
    else:
        if part.leader in live:
            raise Rejected(ErrorCode.ELECTION_NOT_NEEDED, "The partition has a leader already.")
        mode = Mode.UNCLEAN
    record = partition_change(topic, tp.partition, part, live, mode=mode)
    if record is None or record.leader in (None, -1):
        raise Rejected(ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                       f"Failed to elect leader for partition {tp}: no replica is live.")
    return record


def preferred_elections(image: MetadataImage, imbalance_percentage: int) -> list[TopicPartition]:
    """The partitions an auto rebalance moves back to their preferred replica.

    A broker's imbalance is the share of the partitions it is preferred for that it does
    not lead. For each broker whose imbalance is above `leader.imbalance.per.broker.percentage`,
    every such partition whose preferred replica is live and in the ISR moves."""
    live = live_brokers(image)
    preferred_for: dict[int, int] = {}
    not_led: dict[int, list[tuple[TopicPartition, PartitionRegistration]]] = {}
    for topic, index, part in partitions(image):
        if not part.replicas:
            continue
        preferred = part.replicas[0]
        preferred_for[preferred] = preferred_for.get(preferred, 0) + 1
        if part.leader != preferred:
            not_led.setdefault(preferred, []).append((TopicPartition(topic.name, index), part))
    moves = []
    for broker, missed in sorted(not_led.items()):
        if len(missed) * 100 <= imbalance_percentage * preferred_for[broker]:
            continue
        moves += [tp for tp, part in missed if broker in live and broker in part.isr]
    return moves
