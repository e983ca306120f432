"""Cluster events from two consecutive snapshots, and the live groups each change touches."""

from __future__ import annotations

from laganalysis.records import ClusterEvent, EventKind

from .analysis import Snapshot

Changed = list[tuple[str, str | None]]  # (event group kind, key) for events.publish_changes


def cluster_events(before: Snapshot | None, after: Snapshot) -> list[ClusterEvent]:
    """Rebalances, leader changes, under-replication and brokers going up or down."""
    if before is None:
        return []
    ms = int(after.at * 1000)
    found = []
    for node, row in after.brokers.items():
        was = before.brokers.get(node, {}).get("status")
        if was != row["status"] and (was == "up" or row["status"] == "up"):
            kind = EventKind.BROKER_UP if row["status"] == "up" else EventKind.BROKER_DOWN
            found.append(ClusterEvent(kind, ms, broker=node,
                                      detail={"from": str(was), "to": row["status"]}))
    for (topic, partition), row in after.partitions.items():
        old = before.partitions.get((topic, partition))
        if old is None:
            continue
        if old["leader"] != row["leader"]:
            found.append(ClusterEvent(EventKind.LEADER_CHANGE, ms, topic=topic,
                                      partition=partition, detail={
                                          "from": str(old["leader"]), "to": str(row["leader"])}))
        if old["under_replicated"] != row["under_replicated"]:
            kind = EventKind.UNDER_REPLICATED if row["under_replicated"] else EventKind.REPLICATED
            found.append(ClusterEvent(kind, ms, topic=topic, partition=partition,
                                      detail={"isr": ",".join(map(str, row["isr"]))}))
    for group_id, row in after.groups.items():
        old = before.groups.get(group_id)
        if old is not None and (old["state"], old["members"]) != (row["state"], row["members"]):
            found.append(ClusterEvent(EventKind.REBALANCE, ms, group=group_id, detail={
                "from": f"{old['state']} ({old['members']} members)",
                "to": f"{row['state']} ({row['members']} members)"}))
    return found


def live_changes(before: Snapshot | None, after: Snapshot) -> Changed:
    """Which event groups to refresh: a page's group when anything it shows changed."""
    def differs(old: dict, new: dict) -> set:  # type: ignore[type-arg]
        # rows are dicts, never None: a key on one side only differs (10,000 a cycle at
        # scale, so no union of the two key sets first)
        changed = {k for k, row in new.items() if old.get(k) != row}
        changed.update(old.keys() - new.keys())
        return changed

    if before is None:
        return [("overview", None), ("brokers", None), ("topics", None), ("groups", None)]
    brokers = differs(before.brokers, after.brokers)
    topics = differs(before.topics, after.topics)
    topics |= {t for t, _ in differs(before.partitions, after.partitions)}
    groups = differs(before.groups, after.groups)
    groups |= {g for g, _, _ in differs(before.group_partitions, after.group_partitions)}
    changed: Changed = []
    if brokers or before.cluster != after.cluster or groups:
        changed.append(("overview", None))
    if brokers:
        changed += [("brokers", None), *(("broker", str(n)) for n in sorted(brokers))]
    if topics:
        changed += [("topics", None), *(("topic", t) for t in sorted(topics))]
    if groups:
        changed += [("groups", None), *(("group", g) for g in sorted(groups))]
    return changed
