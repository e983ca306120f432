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

from django.db import DEFAULT_DB_ALIAS, models, transaction

from controlcenter.clusters import current_name
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

from . import rows
from .analysis import Row, Snapshot

BATCH = 500  # keys in one DELETE: under SQLite's limit of variables in one statement
# The latest snapshot's tables: model, key columns, Snapshot attribute.
TABLES: tuple[tuple[type[models.Model], tuple[str, ...], str], ...] = (
    (BrokerState, ("node_id",), "brokers"),
    (TopicState, ("name",), "topics"),
    (PartitionState, ("topic", "partition"), "partitions"),
    (GroupState, ("group_id",), "groups"),
    (GroupPartitionLag, ("group_id", "topic", "partition"), "group_partitions"),
)
HISTORY: tuple[tuple[type[models.Model], tuple[str, ...]], ...] = (  # model, series columns
    (GroupLagHistory, ("group_id",)),
    (PartitionLagHistory, ("group_id", "topic", "partition")),
    (ThroughputHistory, ("kind", "name")),
)
# When rows merge, each of these keeps the worst (highest) value of the bucket.
WORST_OF_BUCKET = ("lag", "total_lag", "max_lag", "lag_seconds", "max_lag_seconds",
                   "messages_in_per_sec", "bytes_in_per_sec", "bytes_out_per_sec")
WORST = {s: i for i, s in enumerate(["NOTFOUND", "OK", "WARN", "ERR", "STOP", "STALL", "REWIND"])}


def when(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC)


class Store:
    def __init__(self, bootstrap_servers: str, policy: Policy,
                 using: str = DEFAULT_DB_ALIAS) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.policy = policy
        self.using = using  # the database alias the read model lives in
        self.previous: Snapshot | None = None

    def cluster_row(self) -> ClusterState:
        row, _ = ClusterState.objects.using(self.using).get_or_create(
            bootstrap_servers=self.bootstrap_servers)
        return row

    def write(self, snap: Snapshot, cycle_seconds: float, interval: float,
              events: list[records.ClusterEvent]) -> None:
        with transaction.atomic(using=self.using):
            self._write(snap, cycle_seconds, interval, events)
        self.previous = snap

    def _write(self, snap: Snapshot, cycle_seconds: float, interval: float,
               events: list[records.ClusterEvent]) -> None:
        now = when(snap.at)
        old = self.previous
        ClusterState.objects.using(self.using).update_or_create(
            bootstrap_servers=self.bootstrap_servers,
            defaults={**snap.cluster, "collected_at": now, "reachable": True, "last_error": "",
                      "unreachable_since": None, "cycle_seconds": cycle_seconds,
                      "interval_seconds": interval})
        for model, keys, name in TABLES:
            sync(model, keys, getattr(snap, name), getattr(old, name) if old else None, now,
                 self.using)
        self._history(snap, old, now)
        ClusterEvent.objects.using(self.using).bulk_create(
            [ClusterEvent(ts=when(e.timestamp_ms / 1000), kind=e.kind.value,
                          subject=" ".join(map(str, e.subject)), detail=dict(e.detail))
             for e in events], batch_size=BATCH)

    def write_unreachable(self, error: str, at: float) -> bool:
        """Marks the cluster unreachable; True when it just became so (publish the banner)."""
        row = self.cluster_row()
        was_reachable = row.reachable or row.unreachable_since is None
        row.reachable, row.last_error = False, error
        if was_reachable:
            row.unreachable_since = when(at)
            ClusterEvent.objects.using(self.using).create(ts=when(at), kind="unreachable",
                                        subject=self.bootstrap_servers, detail={"error": error})
        row.save(using=self.using)
        return was_reachable

    def _history(self, snap: Snapshot, old: Snapshot | None, now: dt.datetime) -> None:
        # every row is the collector's cluster's (manage.py collect --cluster)
        raw = {"cluster": current_name(), "ts": now, "resolution": Resolution.RAW.value}
        keep: tuple[str, ...] = ("total_lag", "max_lag", "max_lag_seconds", "status")
        rows.insert(GroupLagHistory, [
            {"group_id": g, **raw, **{k: row[k] for k in keep}}
            for g, row in snap.groups.items()
            if old is None or _differs(old.groups.get(g), row, keep)], self.using)
        keep = ("committed_offset", "end_offset", "lag", "lag_seconds", "status")
        rows.insert(PartitionLagHistory, [
            {"group_id": g, "topic": t, "partition": p, **raw, **{k: row[k] for k in keep}}
            for (g, t, p), row in snap.group_partitions.items()
            if old is None or _differs(old.group_partitions.get((g, t, p)), row,
                                       ("committed_offset", "end_offset", "status"))],
            self.using)
        rates = ("messages_in_per_sec", "bytes_in_per_sec", "bytes_out_per_sec")
        rows.insert(ThroughputHistory, [
            {"kind": ThroughputKind.TOPIC.value, "name": t, **raw, "bytes_out_per_sec": None,
             **{k: row[k] for k in rates[:2]}}
            for t, row in snap.topics.items()
            if row["messages_in_per_sec"] is not None
            and (old is None or _differs(old.topics.get(t), row, rates[:2]))] + [
            {"kind": ThroughputKind.BROKER.value, "name": str(n), **raw,
             **{k: row[k] for k in rates}}
            for n, row in snap.brokers.items()
            if (row["bytes_in_per_sec"] is not None or row["messages_in_per_sec"] is not None)
            and (old is None or _differs(old.brokers.get(n), row, rates))], self.using)

    def compact(self, at: float) -> int:
        """Downsample and drop history by the retention policy; returns rows removed."""
        removed = 0
        oldest = when(at - self.policy.tiers[-1].max_age)  # this old and older: gone
        for model, _ in HISTORY:
            removed += model._default_manager.using(self.using).filter(ts__lte=oldest).delete()[0]
        removed += ClusterEvent.objects.using(self.using).filter(ts__lte=oldest).delete()[0]
        for model, series in HISTORY:
            removed += downsample(model, series, at, self.policy, self.using)
        return removed


def _differs(old: Row | None, new: Row, fields: tuple[str, ...]) -> bool:
    return old is None or any(old.get(f) != new[f] for f in fields)


def sync(model: type[models.Model], keys: tuple[str, ...], new: dict[Any, Row],
         old: dict[Any, Row] | None, now: dt.datetime, using: str) -> None:
    """Upsert rows that differ from `old` and delete the ones gone; no `old`: the whole table."""
    def key_of(values: tuple[Any, ...] | Any) -> tuple[Any, ...]:
        return values if isinstance(values, tuple) else (values,)

    manager = model._default_manager.db_manager(using)
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
    cluster = current_name()  # the read model's rows are keyed by cluster too
    rows.insert(model, [{"cluster": cluster, **dict(zip(keys, key_of(k), strict=True)), **new[k],
                         "updated_at": now} for k in changed], using, unique=("cluster", *keys))


def downsample(model: type[models.Model], series: tuple[str, ...], at: float, policy: Policy,
               using: str) -> int:
    """Merge the raw rows of every bucket that has wholly aged out of the raw tier into one
    row per series and bucket: the newest offsets, the worst lag, rate and status.

    Only whole buckets: one merged in two compactions (its older half, then the rest a
    minute later) would become two rows for one minute."""
    raw, rest = policy.tiers[0], [t for t in policy.tiers if t.resolution > 0]
    if not rest:
        return 0  # every tier keeps every row
    width = rest[0].resolution
    edge = (at - (raw.max_age if raw.resolution == 0 else 0)) // width * width
    columns = {f.name for f in model._meta.get_fields()}
    worst = [name for name in WORST_OF_BUCKET if name in columns]
    status = ["status"] if "status" in columns else []
    manager = model._default_manager.db_manager(using)
    aged = (manager.filter(resolution=Resolution.RAW, ts__lt=when(edge)).order_by("ts", "pk")
            .values("pk", "ts", *series, *worst, *status))
    buckets: defaultdict[tuple[tuple[Hashable, ...], float], list[dict[str, Any]]] = (
        defaultdict(list))
    for row in aged:
        bucket = policy.bucket(row["ts"].timestamp(), at)
        if bucket is not None:
            buckets[(tuple(row[f] for f in series), bucket)].append(row)
    kept, doomed = [], []
    for (_, bucket), members in buckets.items():
        keep = {"ts": when(bucket), "resolution": Resolution.MINUTE.value,
                "pk": members[-1]["pk"]}  # the newest row: the newest offsets of the bucket
        for name in worst:
            values = [m[name] for m in members if m[name] is not None]
            keep[name] = max(values) if values else None
        if status:
            keep["status"] = max((m["status"] for m in members), key=lambda s: WORST.get(s, 0))
        kept.append(keep)
        doomed += [m["pk"] for m in members[:-1]]
    rows.update(model, kept, using)
    for i in range(0, len(doomed), BATCH):
        manager.filter(pk__in=doomed[i:i + BATCH]).delete()
    return len(doomed)
