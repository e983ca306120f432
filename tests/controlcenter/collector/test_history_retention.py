"""The read model's history under a fake clock, on the real database code (SQLite, the
default, and PostgreSQL): every cycle for an hour, one row per minute for a week, then
nothing, so storage stays flat however long the collector runs."""

from __future__ import annotations

import datetime as dt
import math
from collections import defaultdict

import pytest
from django.db.models import Model

from controlcenter.collector.analysis import Snapshot
from controlcenter.collector.store import Store
from controlcenter.models import (
    GroupLagHistory,
    PartitionLagHistory,
    Resolution,
    ThroughputHistory,
)
from laganalysis.retention import DEFAULT_POLICY, Policy

pytestmark = [pytest.mark.django_db(databases=["default", "postgres"]),
              pytest.mark.usefixtures("postgres_alias")]
DATABASES = pytest.mark.parametrize("using", ["default", "postgres"])
T0 = 1_700_000_017.0  # not on a minute: compactions fall mid-minute, as they do for real
HOUR, WEEK = 3600.0, 7 * 86400.0
HISTORY: tuple[type[Model], ...] = (GroupLagHistory, PartitionLagHistory, ThroughputHistory)


def lag_at(cycle: int) -> int:
    return cycle % 7  # a consumer that falls behind and catches up: a change every cycle


def status_at(cycle: int) -> str:
    return "WARN" if cycle % 50 == 3 else "OK"


def snapshot(cycle: int, at: float) -> Snapshot:
    """What the analyzer gives for a cluster of one broker, one topic with two partitions
    and one group on it, at cycle `cycle`."""
    lag, committed = lag_at(cycle), 10 * cycle
    parts = {("orders", p): {
        "leader": 1, "replicas": [1], "isr": [1], "offline": False, "under_replicated": False,
        "under_min_isr": False, "log_start_offset": 0, "log_end_offset": committed + lag,
        "size_bytes": 100 * (committed + lag), "messages_in_per_sec": float(lag)}
        for p in (0, 1)}
    lags = {("billing", "orders", p): {
        "committed_offset": committed, "end_offset": committed + lag, "lag": lag,
        "lag_seconds": float(lag), "status": status_at(cycle), "consumer_id": "c-1",
        "client_id": "billing", "host": "/10.0.0.1"} for p in (0, 1)}
    return Snapshot(
        at=at,
        cluster={"cluster_id": "c", "controller_id": 1, "brokers": 1, "topics": 1,
                 "partitions": 2, "under_replicated": 0, "offline": 0, "under_min_isr": 0,
                 "groups": 1, "active_controller_count": 1, "preferred_leader_ratio": 1.0},
        brokers={1: {"host": "127.0.0.1", "port": 9092, "rack": None, "status": "up",
                     "is_controller": True, "partitions": 2, "leaders": 2,
                     "bytes_in_per_sec": 100.0 * lag, "bytes_out_per_sec": 0.0,
                     "messages_in_per_sec": float(lag), "process_state": None}},
        topics={"orders": {
            "internal": False, "partitions": 2, "replication_factor": 1, "under_replicated": 0,
            "offline": 0, "under_min_isr": 0, "min_insync_replicas": 1,
            "total_messages": 2 * (committed + lag), "size_bytes": 200 * (committed + lag),
            "messages_in_per_sec": 2.0 * lag, "bytes_in_per_sec": 200.0 * lag}},
        partitions=parts,
        groups={"billing": {
            "state": "Stable", "protocol_type": "consumer", "protocol": "range", "members": 1,
            "coordinator": 1, "topics": 1, "partitions": 2, "total_lag": 2 * lag,
            "max_lag": lag, "max_lag_seconds": float(lag), "status": status_at(cycle),
            "complete": 1.0}},
        group_partitions=lags,
    )


def run(store: Store, start: float, end: float, interval: float) -> list[int]:
    """Cycles from `start` to `end` on the fake clock, compacting every minute as the
    collector does; the history row count after each compaction."""
    counts = []
    last_compaction = -math.inf
    for cycle in range(int((end - start) / interval) + 1):
        at = start + cycle * interval
        store.write(snapshot(cycle, at), 0.1, interval, [])
        if at - last_compaction >= 60:
            store.compact(at)
            last_compaction = at
            counts.append(sum(m._default_manager.using(store.using).count() for m in HISTORY))
    return counts


def ts(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC)


@DATABASES
def test_every_cycle_is_kept_for_an_hour_then_one_row_a_minute_for_a_week(using: str) -> None:
    interval = 10.0
    end = T0 + 2 * HOUR + 600
    store = Store("bench:9092", DEFAULT_POLICY, using=using)
    run(store, T0, end, interval)
    cycles = {T0 + c * interval: c for c in range(int((end - T0) / interval) + 1)}

    rows = list(GroupLagHistory.objects.using(using).order_by("ts"))
    raw = [r for r in rows if r.resolution == Resolution.RAW]
    minute = [r for r in rows if r.resolution == Resolution.MINUTE]
    # The last hour: every cycle, as written.
    assert {r.ts for r in raw} >= {ts(at) for at in cycles if at > end - HOUR}
    assert all(r.ts > ts(end - HOUR - 120) for r in raw)  # compacted within a minute or two
    # Before it: one row per minute, on the minute, each minute of the run there once.
    starts = [r.ts.timestamp() for r in minute]
    assert all(s % 60 == 0 for s in starts) and len(set(starts)) == len(starts)
    assert starts == [float(m) for m in range(int(T0 // 60 * 60), int(starts[-1]) + 60, 60)]
    assert raw[0].ts.timestamp() < starts[-1] + 60 + interval  # no gap between the tiers
    # A minute keeps the worst of its cycles: highest lag, worst status.
    by_minute: defaultdict[float, list[int]] = defaultdict(list)
    for at, cycle in cycles.items():
        by_minute[at // 60 * 60].append(cycle)
    for row in minute:
        its = by_minute[row.ts.timestamp()]
        assert row.max_lag == max(lag_at(c) for c in its)
        assert row.status == ("WARN" if any(status_at(c) == "WARN" for c in its) else "OK")
    # Partition rows keep the newest offsets of the minute.
    for part in PartitionLagHistory.objects.using(using).filter(resolution=Resolution.MINUTE):
        assert part.committed_offset == 10 * max(by_minute[part.ts.timestamp()])

    store.compact(end + WEEK - HOUR)  # a week on: only the run's last hour is younger
    left = list(GroupLagHistory.objects.using(using))
    assert {r.resolution for r in left} == {Resolution.MINUTE}
    assert min(r.ts for r in left) >= ts(end - HOUR) - dt.timedelta(minutes=1)
    store.compact(end + WEEK + 60)
    assert sum(m._default_manager.using(using).count() for m in HISTORY) == 0


@DATABASES
def test_history_stops_growing_once_the_oldest_tier_is_full(using: str) -> None:
    # The default policy's shape on a shorter scale (two minutes raw, ten at one a minute),
    # so that the run covers several times the oldest tier.
    store = Store("bench:9092", Policy.parse("2m=raw,10m=1m"), using=using)
    counts = run(store, T0, T0 + 40 * 60, 5.0)
    steady = counts[15:]  # after the first 12 minutes every tier is full
    assert len(set(steady)) == 1, counts
    per_series = 120 / 5 + 10  # a cycle's row for two minutes, then one a minute for ten
    series = 1 + 2 + 2  # the group, its two partitions, the topic's and the broker's rates
    assert steady[0] <= series * (per_series + 60 / 5 + 1)
