"""Writes snapshots into the read model: only rows that changed, in one transaction a cycle.

History is written only when a value changed (a flat stretch is one row; charts step from
the last row), and `compact` applies laganalysis's retention policy to rows that aged out of
the full-resolution tier: one row per series per minute (newest offsets, worst lag and
status), nothing after the last tier. So storage follows how much changes, never the number
of cycles, and stays bounded. README.md ("Sizing") has the figures.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Hashable
from typing import Any

from django.db import models, transaction

from controlcenter.models import (
    BrokerState,
    ClusterEvent,
    ClusterState,
    GroupLagHistory,
    GroupPartitionLag,
    GroupState,
    PartitionLagHistory,
    PartitionState,
    Resolution,
    ThroughputHistory,
    ThroughputKind,
    TopicState,
)
from laganalysis import records
from laganalysis.retention import Policy

from .analysis import Row, Snapshot

BATCH = 500  # SQLite's variable limit with ~15 columns a row
WORST = {s: i for i, s in enumerate(["NOTFOUND", "OK", "WARN", "ERR", "STOP", "STALL", "REWIND"])}


def when(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC)


class Store:
    def __init__(self, bootstrap_servers: str, policy: Policy) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.policy = policy
        self.previous: Snapshot | None = None

    def cluster_row(self) -> ClusterState:
        row, _ = ClusterState.objects.get_or_create(bootstrap_servers=self.bootstrap_servers)
        return row

    @transaction.atomic
    def write(self, snap: Snapshot, cycle_seconds: float, interval: float,
              events: list[records.ClusterEvent]) -> None:
        now = when(snap.at)
        old = self.previous
        ClusterState.objects.update_or_create(
            bootstrap_servers=self.bootstrap_servers,
            defaults={**snap.cluster, "collected_at": now, "reachable": True, "last_error": "",
                      "unreachable_since": None, "cycle_seconds": cycle_seconds,
                      "interval_seconds": interval})
        sync(BrokerState, ("node_id",), snap.brokers, old.brokers if old else None, now)
        sync(TopicState, ("name",), snap.topics, old.topics if old else None, now)
        sync(PartitionState, ("topic", "partition"), snap.partitions,
             old.partitions if old else None, now)
        sync(GroupState, ("group_id",), snap.groups, old.groups if old else None, now)
        sync(GroupPartitionLag, ("group_id", "topic", "partition"), snap.group_partitions,
             old.group_partitions if old else None, now)
        self._history(snap, old, now)
        ClusterEvent.objects.bulk_create(
            [ClusterEvent(ts=when(e.timestamp_ms / 1000), kind=e.kind.value,
                          subject=" ".join(map(str, e.subject)), detail=dict(e.detail))
             for e in events], batch_size=BATCH)
        self.previous = snap

    def write_unreachable(self, error: str, at: float) -> bool:
        """Marks the cluster unreachable; True when it just became so (publish the banner)."""
        row = self.cluster_row()
        was_reachable = row.reachable or row.unreachable_since is None
        row.reachable, row.last_error = False, error
        if was_reachable:
            row.unreachable_since = when(at)
            ClusterEvent.objects.create(ts=when(at), kind="unreachable",
                                        subject=self.bootstrap_servers, detail={"error": error})
        row.save()
        return was_reachable

    def _history(self, snap: Snapshot, old: Snapshot | None, now: dt.datetime) -> None:
        keep: tuple[str, ...] = ("total_lag", "max_lag", "max_lag_seconds", "status")
        GroupLagHistory.objects.bulk_create([
            GroupLagHistory(group_id=g, ts=now, **{k: row[k] for k in keep})
            for g, row in snap.groups.items()
            if old is None or _differs(old.groups.get(g), row, keep)], batch_size=BATCH)
        keep = ("committed_offset", "end_offset", "lag", "lag_seconds", "status")
        PartitionLagHistory.objects.bulk_create([
            PartitionLagHistory(group_id=g, topic=t, partition=p, ts=now,
                                **{k: row[k] for k in keep})
            for (g, t, p), row in snap.group_partitions.items()
            if old is None or _differs(old.group_partitions.get((g, t, p)), row,
                                       ("committed_offset", "end_offset", "status"))],
            batch_size=BATCH)
        rates: tuple[str, ...] = ("messages_in_per_sec", "bytes_in_per_sec")
        rows = [ThroughputHistory(kind=ThroughputKind.TOPIC, name=t, ts=now,
                                  **{k: row[k] for k in rates})
                for t, row in snap.topics.items()
                if row["messages_in_per_sec"] is not None
                and (old is None or _differs(old.topics.get(t), row, rates))]
        rates = ("messages_in_per_sec", "bytes_in_per_sec", "bytes_out_per_sec")
        rows += [ThroughputHistory(kind=ThroughputKind.BROKER, name=str(n), ts=now,
                                   **{k: row[k] for k in rates})
                 for n, row in snap.brokers.items()
                 if row["bytes_in_per_sec"] is not None or row["messages_in_per_sec"] is not None]
        ThroughputHistory.objects.bulk_create(rows, batch_size=BATCH)

    def compact(self, at: float) -> int:
        """Downsample and drop history by the retention policy; returns rows removed."""
        removed = 0
        oldest = when(at - self.policy.tiers[-1].max_age)
        for model in (GroupLagHistory, PartitionLagHistory, ThroughputHistory):
            removed += model._default_manager.filter(ts__lt=oldest).delete()[0]
        removed += ClusterEvent.objects.filter(ts__lt=oldest).delete()[0]
        raw_age = self.policy.tiers[0].max_age if self.policy.tiers[0].resolution == 0 else 0
        aged = when(at - raw_age)
        removed += downsample(GroupLagHistory, ("group_id",), aged, at, self.policy)
        removed += downsample(PartitionLagHistory, ("group_id", "topic", "partition"), aged, at,
                              self.policy)
        removed += downsample(ThroughputHistory, ("kind", "name"), aged, at, self.policy)
        return removed


def _differs(old: Row | None, new: Row, fields: tuple[str, ...]) -> bool:
    return old is None or any(old.get(f) != new[f] for f in fields)


def sync(model: type[models.Model], keys: tuple[str, ...], new: dict[Any, Row],
         old: dict[Any, Row] | None, now: dt.datetime) -> None:
    """Upsert rows that differ from `old` and delete the ones gone; no `old`: the whole table."""
    def key_of(values: tuple[Any, ...] | Any) -> tuple[Any, ...]:
        return values if isinstance(values, tuple) else (values,)

    manager = model._default_manager
    if old is None:
        existing = {tuple(k) for k in manager.values_list(*keys)}
        gone = existing - {key_of(k) for k in new}
        changed = list(new)
    else:
        gone = {key_of(k) for k in old.keys() - new.keys()}
        changed = [k for k, row in new.items() if old.get(k) != row]
    for i in range(0, len(gone), BATCH):
        query = models.Q()
        for values in list(gone)[i:i + BATCH]:
            query |= models.Q(**dict(zip(keys, values, strict=True)))
        manager.filter(query).delete()
    objs = [model(**dict(zip(keys, key_of(k), strict=True)), **new[k], updated_at=now)
            for k in changed]
    if objs:
        fields = [*new[changed[0]].keys(), "updated_at"]
        manager.bulk_create(objs, batch_size=BATCH, update_conflicts=True,
                            unique_fields=list(keys), update_fields=fields)


def downsample(model: type[models.Model], series: tuple[str, ...], aged: dt.datetime,
               at: float, policy: Policy) -> int:
    """Merge raw rows older than `aged` into one row per series per bucket."""
    rows = list(model._default_manager.filter(resolution=Resolution.RAW, ts__lt=aged)
                .order_by("ts"))
    buckets: defaultdict[tuple[tuple[Hashable, ...], float], list[Any]] = defaultdict(list)
    row: Any
    for row in rows:
        bucket = policy.bucket(row.ts.timestamp(), at)
        if bucket is not None:
            buckets[(tuple(getattr(row, f) for f in series), bucket)].append(row)
    doomed: list[int] = []
    for (_, bucket), members in buckets.items():
        keep = members[-1]  # the newest offsets of the bucket
        for name in ("lag", "total_lag", "max_lag", "lag_seconds", "max_lag_seconds",
                     "messages_in_per_sec", "bytes_in_per_sec", "bytes_out_per_sec"):
            values = [getattr(m, name) for m in members if getattr(m, name, None) is not None]
            if values:
                setattr(keep, name, max(values))  # the worst of the bucket survives
        if hasattr(keep, "status"):
            keep.status = max((m.status for m in members), key=lambda s: WORST.get(s, 0))
        keep.ts, keep.resolution = when(bucket), Resolution.MINUTE
        keep.save()
        doomed += [m.pk for m in members[:-1]]
    for i in range(0, len(doomed), BATCH):
        model._default_manager.filter(pk__in=doomed[i:i + BATCH]).delete()
    return len(doomed)

