"""ListOffsets queries and their answers, per partition."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from confluent_kafka.admin import OffsetSpec

from .errors import ClusterRequestError
from .metadata import TopicPartition


class OffsetKind(StrEnum):
    EARLIEST = "earliest"  # the log start offset
    LATEST = "latest"  # the log end offset (high watermark)
    MAX_TIMESTAMP = "max_timestamp"  # the record with the largest timestamp
    TIMESTAMP = "timestamp"  # the first offset whose timestamp is >= the given one


@dataclass(frozen=True)
class OffsetQuery:
    kind: OffsetKind
    timestamp_ms: int | None = None

    @classmethod
    def at(cls, timestamp_ms: int) -> OffsetQuery:
        return cls(OffsetKind.TIMESTAMP, timestamp_ms)

    def spec(self) -> Any:
        if self.kind is OffsetKind.TIMESTAMP:
            return OffsetSpec.for_timestamp(int(self.timestamp_ms or 0))
        return getattr(OffsetSpec, self.kind.value)()


EARLIEST = OffsetQuery(OffsetKind.EARLIEST)
LATEST = OffsetQuery(OffsetKind.LATEST)
MAX_TIMESTAMP = OffsetQuery(OffsetKind.MAX_TIMESTAMP)


@dataclass(frozen=True)
class ListedOffset:
    offset: int  # -1 when no record matches a timestamp query
    timestamp: int  # ms; -1 when the broker has none for this answer
    leader_epoch: int | None


@dataclass(frozen=True)
class ListOffsetsResult:
    """Per-partition answers: a partition is in `offsets` or in `errors`, never both."""

    offsets: dict[TopicPartition, ListedOffset] = field(default_factory=dict)
    errors: dict[TopicPartition, ClusterRequestError] = field(default_factory=dict)

    def checked(self) -> dict[TopicPartition, ListedOffset]:
        """The offsets, or the first partition's error raised."""
        for tp in sorted(self.errors):
            raise self.errors[tp]
        return self.offsets

    def offset(self, tp: TopicPartition) -> int | None:
        found = self.offsets.get(tp)
        return None if found is None else found.offset
