"""A Jepsen-style checker for a Kafka history: what producers were told against what is there.

A `History` collects, from any thread:

- producer operations: `invoke` (a value is handed to a client), then one completion:
  `ok` (acknowledged, with partition and offset), `fail` (definitely not written: the
  client refused it before sending) or `info` (unknown: an error after it may have been
  sent, or no answer before the end);
- consumer reads: partition, offset, key, value, by a named process;
- a final complete read of every partition, from the log start to the high watermark.

`check(history)` returns a `Report` of anomalies, each a list of human-readable findings:

- `lost`: acknowledged, absent from the final read;
- `duplicated`: one value at two positions (with the idempotent producer, always a bug);
- `reordered`: one producer's acknowledged writes to a partition whose offsets do not
  follow the order it sent them in;
- `changed_meaning`: one position read with two values, or an acknowledged position
  holding another value;
- `unexpected`: a value read that nobody attempted;
- `failed_but_present`: a value whose write definitely failed, read anyway;
- `unconsumed`: acknowledged, never read by the consumers (only when the history says the
  consumers drained the topic; a group that lost its committed offsets shows up here).

Transactions fit the same model. A transactional producer `invoke`s each value, then
completes all of a transaction's values at once: `ok` if it committed, `fail` if it aborted
(its records are in the log, but must never be visible to read_committed: the final read and
the consumers read committed, so a visible one is `failed_but_present`), `info` if the
producer could not learn the outcome. `transaction(values)` groups them, and the checker adds:

- `partial`: a transaction with some of its values in the final read and others absent;
- `offsets`: for consume-transform-produce, where `derive(output, source)` records that an
  output was written in the same transaction that committed the source's consumed offset:
  every source record below the group's final committed offset (`committed_offsets`) has
  exactly one output in the final read, and every one at or above it none, i.e. offsets are
  committed with their transaction's outputs and only with them.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from itertools import pairwise

Position = tuple[int, int]  # (partition, offset)


@dataclass
class Write:
    process: str
    value: str
    index: int  # the order this process invoked its writes in
    status: str = "invoke"  # invoke -> ok | fail | info
    position: Position | None = None
    error: str = ""
    invoked_at: float = 0.0  # time.monotonic(), for measuring failover from a history
    completed_at: float = 0.0


@dataclass(frozen=True)
class Read:
    process: str
    partition: int
    offset: int
    key: str | None
    value: str


@dataclass
class History:
    writes: dict[str, Write] = field(default_factory=dict)
    reads: list[Read] = field(default_factory=list)
    final: dict[int, list[tuple[int, str | None, str]]] | None = None
    consumers_drained: bool = False
    transactions: list[tuple[str, ...]] = field(default_factory=list)
    derived: dict[str, str] = field(default_factory=dict)  # output value -> source value
    committed_offsets: dict[int, int] | None = None  # the transforming group's, per partition
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _counts: dict[str, int] = field(default_factory=lambda: defaultdict(int), repr=False)

    def invoke(self, process: str, value: str) -> None:
        with self._lock:
            if value in self.writes:
                raise ValueError(f"value {value!r} attempted twice: values must be unique")
            index = self._counts[process]
            self._counts[process] += 1
            self.writes[value] = Write(process, value, index, invoked_at=time.monotonic())

    def ok(self, value: str, partition: int, offset: int | None) -> None:
        """An acknowledged write. librdkafka can acknowledge a write without its offset (an
        idempotent retry it settled itself); such a write must still not be lost, but has no
        position to check."""
        self._complete(value, "ok", None if offset is None else (partition, offset))

    def fail(self, value: str, error: str = "") -> None:
        self._complete(value, "fail", None, error)

    def info(self, value: str, error: str = "") -> None:
        self._complete(value, "info", None, error)

    def _complete(self, value: str, status: str, position: Position | None,
                  error: str = "") -> None:
        with self._lock:
            write = self.writes[value]
            if write.status != "invoke":
                raise ValueError(f"{value!r} completed twice ({write.status}, then {status})")
            write.status, write.position, write.error = status, position, error
            write.completed_at = time.monotonic()

    def read(self, process: str, partition: int, offset: int, key: str | None,
             value: str) -> None:
        with self._lock:
            self.reads.append(Read(process, partition, offset, key, value))

    def transaction(self, values: list[str]) -> None:
        """Group invoked values into one transaction (all-or-nothing)."""
        with self._lock:
            self.transactions.append(tuple(values))

    def derive(self, output: str, source: str) -> None:
        with self._lock:
            self.derived[output] = source

    def final_read(self, partitions: dict[int, list[tuple[int, str | None, str]]]) -> None:
        with self._lock:
            self.final = {p: list(records) for p, records in partitions.items()}

    def all_writes(self) -> list[Write]:
        """A snapshot, safe while client threads are still adding to the history."""
        with self._lock:
            return list(self.writes.values())

    def acked(self) -> list[Write]:
        return [w for w in self.all_writes() if w.status == "ok"]

    def first_ack_after(self, since: float, partitions: set[int] | None = None) -> float | None:
        """Seconds from `since` to the first ack of a write sent after it (to one of
        `partitions`). A write sent after a leader's death can only be acked by its
        successor; one sent before may carry an answer the dead leader gave."""
        times = [w.completed_at for w in self.acked() if w.invoked_at > since
                 and w.position is not None
                 and (partitions is None or w.position[0] in partitions)]
        return min(times) - since if times else None

    def summary(self) -> str:
        statuses: dict[str, int] = defaultdict(int)
        for w in self.all_writes():
            statuses[w.status] += 1
        final = sum(len(r) for r in (self.final or {}).values())
        return (f"{len(self.writes)} writes ({dict(statuses)}), {len(self.reads)} consumer "
                f"reads, {final} records in the final read")


@dataclass
class Report:
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    reordered: list[str] = field(default_factory=list)
    changed_meaning: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    failed_but_present: list[str] = field(default_factory=list)
    unconsumed: list[str] = field(default_factory=list)
    partial: list[str] = field(default_factory=list)
    offsets: list[str] = field(default_factory=list)

    ANOMALIES = ("lost", "duplicated", "reordered", "changed_meaning", "unexpected",
                 "failed_but_present", "unconsumed", "partial", "offsets")

    @property
    def valid(self) -> bool:
        return not any(getattr(self, name) for name in self.ANOMALIES)

    def found(self) -> dict[str, int]:
        return {name: len(getattr(self, name)) for name in self.ANOMALIES
                if getattr(self, name)}

    def __str__(self) -> str:
        if self.valid:
            return "no anomalies"
        lines = []
        for name in self.ANOMALIES:
            findings: list[str] = getattr(self, name)
            if findings:
                lines.append(f"{name} ({len(findings)}): " + "; ".join(findings[:10]))
        return "\n".join(lines)


def check(history: History) -> Report:
    if history.final is None:
        raise ValueError("the history has no final read: nothing to check writes against")
    report = Report()
    final_at: dict[Position, str] = {}
    for partition, records in history.final.items():
        for offset, _key, value in records:
            final_at[(partition, offset)] = value
    seen = _values_by_position(history, final_at)
    final_values = set(final_at.values())
    _check_positions(history, report, seen)
    _check_acked(history, report, seen, final_values)
    report.reordered = _reordered(history)
    if history.consumers_drained:
        consumed = {r.value for r in history.reads}
        report.unconsumed = [f"{w.value!r} acked at {_pos(w.position)}"
                             for w in history.acked()
                             if w.value not in consumed and w.position is not None]
    report.partial = _partial(history, final_values)
    report.offsets = _offsets(history, final_at)
    return report


def _check_positions(history: History, report: Report, seen: dict[Position, set[str]]) -> None:
    """Each position read as one value, each value at one position, and written by us."""
    positions_of: dict[str, set[Position]] = defaultdict(set)
    for position, values in seen.items():
        for value in values:
            positions_of[value].add(position)
    for position, values in sorted(seen.items()):
        if len(values) > 1:
            report.changed_meaning.append(f"{_pos(position)} read as {sorted(values)}")
    for value, positions in sorted(positions_of.items()):
        write = history.writes.get(value)
        if len(positions) > 1:
            report.duplicated.append(f"{value!r} at {', '.join(map(_pos, sorted(positions)))}")
        if write is None:
            report.unexpected.append(f"{value!r} at {_pos(min(positions))}")
        elif write.status == "fail":
            report.failed_but_present.append(f"{value!r} at {_pos(min(positions))}")


def _check_acked(history: History, report: Report, seen: dict[Position, set[str]],
                 final_values: set[str]) -> None:
    """Every acknowledged write present in the final read, at the position it was acked."""
    for write in history.acked():
        if write.value not in final_values:
            report.lost.append(f"{write.value!r} acked at {_pos(write.position)}")
        if write.position is None:
            continue
        other = seen.get(write.position, set()) - {write.value}
        if other:
            report.changed_meaning.append(
                f"{write.value!r} acked at {_pos(write.position)}, which holds {sorted(other)}")


def _partial(history: History, final_values: set[str]) -> list[str]:
    findings = []
    for values in history.transactions:
        present = [v for v in values if v in final_values]
        if present and len(present) < len(values):
            findings.append(f"{len(present)} of {len(values)} values of the transaction of "
                            f"{values[0]!r} present: {present[:5]}")
    return findings


def _offsets(history: History, final_at: dict[Position, str]) -> list[str]:
    """Each source record below the committed offset transformed exactly once, none above."""
    if history.committed_offsets is None:
        return []
    # The processes whose records are transformed: every record they wrote is a source.
    inputs = {history.writes[s].process for s in history.derived.values()
              if s in history.writes}
    outputs: dict[str, int] = defaultdict(int)
    for value in final_at.values():
        if value in history.derived:
            outputs[history.derived[value]] += 1
    findings = []
    for (partition, offset), value in sorted(final_at.items()):
        write = history.writes.get(value)
        if write is None or write.process not in inputs:
            continue
        expected = 1 if offset < history.committed_offsets.get(partition, 0) else 0
        if outputs[value] != expected:
            findings.append(f"{value!r} at {_pos((partition, offset))} transformed "
                            f"{outputs[value]} times, expected {expected} (committed offset "
                            f"{history.committed_offsets.get(partition, 0)})")
    return findings


def _values_by_position(history: History, final_at: dict[Position, str]
                        ) -> dict[Position, set[str]]:
    seen: dict[Position, set[str]] = defaultdict(set)
    for position, value in final_at.items():
        seen[position].add(value)
    for r in history.reads:
        seen[(r.partition, r.offset)].add(r.value)
    return seen


def _reordered(history: History) -> list[str]:
    """Per producer and partition, acked offsets must rise in the order of sending."""
    by_stream: dict[tuple[str, int], list[Write]] = defaultdict(list)
    for write in history.acked():
        if write.position is not None:
            by_stream[(write.process, write.position[0])].append(write)
    findings = []
    for (process, partition), writes in sorted(by_stream.items()):
        writes.sort(key=lambda w: w.index)
        for before, after in pairwise(writes):
            assert before.position is not None and after.position is not None
            if after.position[1] <= before.position[1]:
                findings.append(
                    f"{process} sent {before.value!r} before {after.value!r} to partition "
                    f"{partition}, acked at offsets {before.position[1]} and "
                    f"{after.position[1]}")
    return findings


def _pos(position: Position | None) -> str:
    return "?" if position is None else f"{position[0]}@{position[1]}"
