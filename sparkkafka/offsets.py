"""Offsets of a streaming read as Spark's checkpoint keeps them, and admission control.

Pure (no client, no Spark). A source offset is Spark's Kafka JSON, ``{"topic": {"0": 23}}``:
the next offset to read in each topic-partition, the same text Spark's own Kafka source writes
to ``<checkpoint>/offsets/<batch>``.
"""

from __future__ import annotations

from collections.abc import Mapping

TP = tuple[str, int]
Offsets = dict[TP, int]


def to_json(offsets: Mapping[TP, int]) -> dict[str, dict[str, int]]:
    """Spark's JSON shape, topics and partitions in order (so equal offsets are equal text)."""
    result: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        result.setdefault(topic, {})[str(partition)] = offset
    return result


def from_json(value: Mapping[str, Mapping[str, int]]) -> Offsets:
    return {(t, int(p)): int(o) for t, ps in value.items() for p, o in ps.items()}


def admit(start: Mapping[TP, int], latest: Mapping[TP, int], max_rows: int | None) -> Offsets:
    """The end of the next micro-batch: ``latest``, cut so that at most ``max_rows`` records are
    admitted in all, shared across partitions in proportion to what each has waiting (as Spark's
    ``maxOffsetsPerTrigger``). ``start`` must name every partition of ``latest``; a partition
    only in ``start`` (deleted) is left out. Every batch admits at least one record while any
    is waiting, so a small limit still makes progress."""
    waiting = {tp: max(0, end - start[tp]) for tp, end in latest.items()}
    total = sum(waiting.values())
    if max_rows is None or total <= max_rows:
        return {tp: max(end, start[tp]) for tp, end in latest.items()}
    shares = {tp: n * max_rows // total for tp, n in waiting.items()}
    left = max_rows - sum(shares.values())
    # Largest remainders first, then topic-partition order: deterministic, and sums exactly.
    order = sorted(waiting, key=lambda tp: (-(waiting[tp] * max_rows % total), tp))
    for tp in order:
        if left == 0:
            break
        if shares[tp] < waiting[tp]:
            shares[tp] += 1
            left -= 1
    return {tp: start[tp] + shares[tp] for tp in latest}
