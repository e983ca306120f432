"""Consumer lag in offsets: the one place the platform computes it.

Lag of a partition = log end offset (high watermark) - committed offset, never negative
(a commit can run ahead of a stale end offset read). A partition assigned to a member but
never committed has no committed offset and no lag, as `kafka-consumer-groups` shows "-".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .errors import ClusterRequestError
from .groups import ConsumerGroup, GroupMember, GroupState
from .metadata import TopicPartition
from .offsets import ListOffsetsResult


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    committed_offset: int | None  # None: assigned, nothing committed yet
    log_end_offset: int | None  # None: the end offset could not be read (see GroupLag.errors)
    lag: int | None  # None when either offset is unknown
    member: GroupMember | None  # the owning member: member_id, instance id, client id, host

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True)
class GroupLag:
    group_id: str
    state: GroupState
    partitions: tuple[PartitionLag, ...]  # sorted by topic, partition
    # End offsets that could not be read (an offline partition, say), per partition.
    errors: Mapping[TopicPartition, ClusterRequestError] = field(default_factory=dict)

    @property
    def total_lag(self) -> int:
        return sum(p.lag or 0 for p in self.partitions)

    @property
    def max_lag_partition(self) -> PartitionLag | None:
        """The partition with the largest lag (the first of equals); None without any lag."""
        known = [p for p in self.partitions if p.lag is not None]
        return max(known, key=lambda p: p.lag or 0, default=None)

    @property
    def max_lag(self) -> int:
        worst = self.max_lag_partition
        return worst.lag or 0 if worst is not None else 0


def group_lag(group: ConsumerGroup, committed: Mapping[TopicPartition, int],
              ends: ListOffsetsResult | Mapping[TopicPartition, int]) -> GroupLag:
    """Lag of every partition the group has committed or has assigned. `ends` is a
    ListOffsets answer, or plain end offsets by partition (the collector's, read already:
    wrapping 10,000 of them in ListedOffsets each cycle cost more than the lag itself)."""
    owners = {tp: m for m in group.members for tp in m.assignment}
    end_of = ends.offset if isinstance(ends, ListOffsetsResult) else ends.get
    errors_of = ends.errors if isinstance(ends, ListOffsetsResult) else {}
    rows = []
    for tp in sorted(set(committed) | set(owners)):
        at = committed.get(tp)
        end = end_of(tp)
        lag = None if at is None or end is None else max(0, end - at)
        rows.append(PartitionLag(tp.topic, tp.partition, at, end, lag, owners.get(tp)))
    errors = {tp: e for tp, e in errors_of.items() if tp in committed or tp in owners}
    return GroupLag(group.group_id, group.state, tuple(rows), errors)
