"""Planning a consumer group's offset reset the way `kafka-consumer-groups --reset-offsets`
does: the six modes, per topic or for every topic the group has committed, and the effect
on each partition in messages and in seconds.

`plan_reset` reads the cluster (the group's state and committed offsets, the partitions'
log start and end offsets, offsets by timestamp) through clusterclient, so a plan is what
executing it would commit right now. The seconds come from laganalysis's time-lag lookup
over the group's own history in the read model (the collector's end-offset/time points);
without history they are unknown, never guessed.
"""

from __future__ import annotations

import datetime as dt
import enum
import time
from collections.abc import Mapping
from dataclasses import dataclass

from clusterclient import (
    EARLIEST,
    LATEST,
    ClusterClient,
    GroupState,
    GroupType,
    OffsetQuery,
    TopicPartition,
)
from controlcenter.models import PartitionLagHistory
from laganalysis.timelag import LookupTable, Point

HISTORY_POINTS = 500  # of the group's own end-offset history, per partition


class ResetMode(enum.StrEnum):
    """The `kafka-consumer-groups` reset options (without their `--` / `--to-` prefix)."""

    EARLIEST = "to-earliest"
    LATEST = "to-latest"
    TO_OFFSET = "to-offset"
    SHIFT_BY = "shift-by"
    TO_DATETIME = "to-datetime"
    BY_DURATION = "by-duration"


class ResetError(Exception):
    """The reset cannot be planned as asked (no committed offsets, no current offset to
    shift from); `str()` says why in the tool's terms."""


@dataclass(frozen=True)
class ResetSpec:
    """What to reset to; `topic` None means every topic the group has committed offsets for.
    Only the field of the chosen mode is used."""

    mode: ResetMode
    topic: str | None = None
    offset: int | None = None  # to-offset
    shift: int | None = None  # shift-by (negative: back)
    at: dt.datetime | None = None  # to-datetime (aware)
    duration: dt.timedelta | None = None  # by-duration (back from now)

    def describe(self) -> dict[str, str | int | None]:
        """The spec as the audit log records it."""
        value: str | int | None = {
            ResetMode.TO_OFFSET: self.offset, ResetMode.SHIFT_BY: self.shift,
            ResetMode.TO_DATETIME: self.at.isoformat() if self.at else None,
            ResetMode.BY_DURATION: str(self.duration) if self.duration else None,
        }.get(self.mode)
        return {"mode": self.mode.value, "topic": self.topic or "(all topics)", "value": value}


@dataclass(frozen=True)
class PartitionReset:
    topic: str
    partition: int
    current: int | None  # committed now; None: nothing committed
    target: int
    log_start_offset: int
    log_end_offset: int
    seconds_before: float | None  # lag in seconds at the current offset (None: no history)
    seconds_after: float | None  # lag in seconds at the target

    @property
    def lag_before(self) -> int | None:
        return None if self.current is None else max(0, self.log_end_offset - self.current)

    @property
    def lag_after(self) -> int:
        return max(0, self.log_end_offset - self.target)

    @property
    def moved(self) -> int | None:
        """Messages the group moves by: positive forward (skipped), negative back (re-read)."""
        return None if self.current is None else self.target - self.current

    @property
    def seconds_moved(self) -> float | None:
        if self.seconds_before is None or self.seconds_after is None:
            return None
        return self.seconds_before - self.seconds_after


@dataclass(frozen=True)
class ResetPlan:
    group_id: str
    state: GroupState
    type: GroupType
    members: int
    spec: ResetSpec
    partitions: tuple[PartitionReset, ...]

    @property
    def may_execute(self) -> bool:
        """Kafka's rule, for groups of either protocol: offsets are altered only while the
        group has no active members (Empty or Dead)."""
        return not self.state.active

    @property
    def refusal(self) -> str:
        """Why the plan cannot be executed now ('' when it can), in the tool's words."""
        if self.may_execute:
            return ""
        return (f"Assignments can only be reset if the group '{self.group_id}' is inactive, "
                f"but the current state is {self.state} ({self.members} active members).")

    def targets(self) -> dict[TopicPartition, int]:
        return {TopicPartition(p.topic, p.partition): p.target for p in self.partitions}


def plan_reset(client: ClusterClient, group_id: str, spec: ResetSpec,
               now: float | None = None) -> ResetPlan:
    """The offsets `spec` resets `group_id` to, per partition, and their effect."""
    now = time.time() if now is None else now
    group = client.describe_group(group_id)
    committed = client.committed_offsets(group_id)
    partitions = _partitions(client, spec, committed)
    starts = client.list_offsets(dict.fromkeys(partitions, EARLIEST)).checked()
    ends = client.list_offsets(dict.fromkeys(partitions, LATEST)).checked()
    by_time = _offsets_by_time(client, spec, partitions, now)
    tables = _lookup_tables(group_id, partitions, {tp: ends[tp].offset for tp in partitions}, now)
    rows = []
    for tp in partitions:
        start, end = starts[tp].offset, ends[tp].offset
        current = committed.get(tp)
        target = _clamp(_target(spec, tp, current, start, end, by_time), start, end)
        rows.append(PartitionReset(
            tp.topic, tp.partition, current, target, start, end,
            None if current is None else _seconds(tables[tp], current, end, now),
            _seconds(tables[tp], target, end, now)))
    return ResetPlan(group_id, group.state, group.type, len(group.members), spec,
                     tuple(rows))


def _partitions(client: ClusterClient, spec: ResetSpec,
                committed: Mapping[TopicPartition, int]) -> list[TopicPartition]:
    if spec.topic is not None:
        topic = client.topic(spec.topic)  # UNKNOWN_TOPIC_OR_PART in the broker's words
        return sorted(TopicPartition(spec.topic, p.partition) for p in topic.partitions)
    if not committed:
        raise ResetError("The group has no committed offsets: choose a topic to reset.")
    return sorted(committed)


def _offsets_by_time(client: ClusterClient, spec: ResetSpec, partitions: list[TopicPartition],
                     now: float) -> dict[TopicPartition, int]:
    if spec.mode is ResetMode.TO_DATETIME and spec.at is not None:
        when_ms = int(spec.at.timestamp() * 1000)
    elif spec.mode is ResetMode.BY_DURATION and spec.duration is not None:
        when_ms = int((now - spec.duration.total_seconds()) * 1000)
    else:
        return {}
    found = client.list_offsets(dict.fromkeys(partitions, OffsetQuery.at(when_ms))).checked()
    return {tp: listed.offset for tp, listed in found.items()}


def _target(spec: ResetSpec, tp: TopicPartition, current: int | None, start: int, end: int,
            by_time: Mapping[TopicPartition, int]) -> int:
    match spec.mode:
        case ResetMode.EARLIEST:
            return start
        case ResetMode.LATEST:
            return end
        case ResetMode.TO_OFFSET:
            return int(spec.offset or 0)
        case ResetMode.SHIFT_BY:
            if current is None:
                raise ResetError(f"Expected a valid current offset for {tp.topic}-{tp.partition} "
                                 "to shift from: the group has not committed one.")
            return current + int(spec.shift or 0)
        case _:
            # No record at or after the time: the end of the log, as the tool does.
            offset = by_time.get(tp, -1)
            return end if offset < 0 else offset


def _clamp(offset: int, start: int, end: int) -> int:
    """Out-of-range targets move to the nearest valid offset, as the tool does."""
    return min(max(offset, start), end)


def _seconds(table: LookupTable, offset: int, end: int, now: float) -> float | None:
    if offset >= end:
        return 0.0  # nothing to read is no time behind, history or not
    return table.lag_seconds(offset, now).seconds


def _lookup_tables(group_id: str, partitions: list[TopicPartition], ends: Mapping[
        TopicPartition, int], now: float) -> dict[TopicPartition, LookupTable]:
    """Each partition's end-offset/time table from the group's history, ending at now."""
    tables = {}
    for tp in partitions:
        rows = list(PartitionLagHistory.objects
                    .filter(group_id=group_id, topic=tp.topic, partition=tp.partition,
                            end_offset__isnull=False)
                    .order_by("-ts").values_list("ts", "end_offset")[:HISTORY_POINTS])
        table = LookupTable(capacity=HISTORY_POINTS + 1)
        for ts, end_offset in reversed(rows):
            if end_offset is not None:  # filtered out above; the column is nullable
                table, _ = table.add(Point(end_offset, ts.timestamp()))
        if table.points:  # without history, one point at now would claim zero seconds
            table, _ = table.add(Point(ends[tp], now))
        tables[tp] = table
    return tables
