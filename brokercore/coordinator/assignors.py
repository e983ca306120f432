"""The server-side assignors of KIP-848 groups: `uniform` and `range`.

An assignor maps every member to the partitions it should own (the group's target
assignment), from each member's subscribed topics, the topics' partition counts and the
previous target. `group.consumer.assignors` lists those a broker offers; the first is the
default, and a member may name another in its heartbeat (`ServerAssignor`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from .consumer_group import Assignment

# member id -> subscribed topic names; topic name -> (topic id, partition count)
Subscriptions = Mapping[str, set[str]]
Topics = Mapping[str, tuple[str, int]]
Assignor = Callable[[Subscriptions, Topics, Mapping[str, Assignment]], dict[str, Assignment]]

Partition = tuple[str, int]  # (topic name, partition)


def uniform(members: Subscriptions, topics: Topics,
            previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Spread partitions evenly over their subscribers, moving as few as possible.

    A partition stays with its previous owner while that member still subscribes to its
    topic; the rest go to the least loaded subscriber; then partitions move from the most
    loaded members to less loaded subscribers until no member has two more than another
    that could take one.
    """
    by_id = {topic_id: name for name, (topic_id, _) in topics.items()}
    owned: dict[str, set[Partition]] = {m: set() for m in members}
    taken: set[Partition] = set()
    for member_id in sorted(members):
        for topic_id, parts in sorted(previous.get(member_id, {}).items()):
            name = by_id.get(topic_id)
            if name is None or name not in members[member_id]:
                continue
            for p in sorted(parts):
                if p < topics[name][1] and (name, p) not in taken:
                    owned[member_id].add((name, p))
                    taken.add((name, p))
    for name in sorted({t for subs in members.values() for t in subs if t in topics}):
        subscribers = sorted(m for m in members if name in members[m])
        for p in range(topics[name][1]):
            if (name, p) not in taken:
                least = min(subscribers, key=lambda m: (len(owned[m]), m))
                owned[least].add((name, p))
    _balance(members, owned)
    return {m: _by_topic_id(parts, topics) for m, parts in owned.items()}


def _balance(members: Subscriptions, owned: dict[str, set[Partition]]) -> None:
    moved = True
    while moved:
        moved = False
        for donor in sorted(owned, key=lambda m: (-len(owned[m]), m)):
            for partition in sorted(owned[donor]):
                takers = [m for m in members if partition[0] in members[m]
                          and len(owned[m]) + 1 < len(owned[donor])]
                if takers:
                    taker = min(takers, key=lambda m: (len(owned[m]), m))
                    owned[donor].remove(partition)
                    owned[taker].add(partition)
                    moved = True
            if moved:
                break


def range_(members: Subscriptions, topics: Topics,
           previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Per topic, contiguous ranges over its subscribers in member id order; the first
    (partitions mod subscribers) members get one partition more. Members subscribed to
    the same topics get the same partition numbers of each (co-partitioning)."""
    result: dict[str, Assignment] = {m: {} for m in members}
    for name in sorted({t for subs in members.values() for t in subs if t in topics}):
        topic_id, count = topics[name]
        subscribers = sorted(m for m in members if name in members[m])
        quota, extra = divmod(count, len(subscribers))
        start = 0
        for i, member_id in enumerate(subscribers):
            size = quota + (1 if i < extra else 0)
            if size:
                result[member_id][topic_id] = frozenset(range(start, start + size))
            start += size
    return result


def _by_topic_id(parts: set[Partition], topics: Topics) -> Assignment:
    grouped: dict[str, set[int]] = {}
    for name, p in parts:
        grouped.setdefault(topics[name][0], set()).add(p)
    return {topic_id: frozenset(ps) for topic_id, ps in grouped.items()}


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_}
