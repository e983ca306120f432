"""From one Reading to the rows of the read model, with the lag rules of laganalysis.

`Analyzer` owns the collector's in-memory state between cycles: Burrow's window per
group/topic/partition, kafka-lag-exporter's end-offset lookup table per partition, and the
previous reading (for rates). Each cycle gives a `Snapshot`: plain dicts per table, keyed the
way the tables are, and the lag samples for the history topic. No Django, no I/O.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from brokercluster.client import BrokerProcess
from clusterclient import TopicPartition
from controlcenter.collector.sampler import TOPIC_BYTES_IN, Reading
from laganalysis.burrow import (
    PartitionStatus,
    Status,
    Thresholds,
    group_verdict,
    partition_status,
)
from laganalysis.records import TOPIC_SETTINGS, LagSample
from laganalysis.timelag import LookupTable, Point
from laganalysis.window import PartitionWindow

Row = dict[str, Any]
# The platform's own topics (the history topics, one "_") are internal like Kafka's "__"
# ones: listed last and hidden by default, so they never lead a fresh platform's pages.
PLATFORM_TOPICS = frozenset(TOPIC_SETTINGS)
GTP = tuple[str, str, int]
# a partition no window has seen yet (nothing observed): NOTFOUND, not a verdict
NOT_FOUND = PartitionStatus(Status.NOTFOUND, 0.0, 0)


@dataclass
class Snapshot:
    at: float
    cluster: Row
    brokers: dict[int, Row]
    topics: dict[str, Row]
    partitions: dict[tuple[str, int], Row]
    groups: dict[str, Row]
    group_partitions: dict[GTP, Row]
    lag_samples: list[LagSample] = field(default_factory=list)


class Analyzer:
    def __init__(self, thresholds: Thresholds | None = None) -> None:
        self.thresholds = thresholds or Thresholds()
        self.windows: dict[GTP, PartitionWindow] = {}
        self.tables: dict[TopicPartition, LookupTable] = {}
        self.previous: Reading | None = None
        self.known_brokers: dict[int, Row] = {}  # every broker seen: down ones stay listed

    def analyze(self, reading: Reading) -> Snapshot:
        tables, stale, at, empty = self.tables, reading.stale, reading.at, LookupTable()
        for tp, end in reading.log_end.items():
            if tp in stale:
                continue  # the last good end, not one read at this time
            tables[tp] = tables.get(tp, empty).add(Point(end, at))[0]
        for gone in tables.keys() - reading.log_end.keys():
            del tables[gone]
        partitions, by_topic = self._partitions(reading)
        topics = self._topics(reading, by_topic)
        groups, group_partitions, samples = self._groups(reading)
        brokers = self._brokers(reading)
        snapshot = Snapshot(reading.at, self._cluster(reading, partitions, brokers, groups),
                            brokers, topics, partitions, groups, group_partitions, samples)
        self.previous = reading
        return snapshot

    # --- topics and partitions --------------------------------------------------------------

    def _rate(self, now: float, value: float | None, before: float | None) -> float | None:
        if self.previous is None or value is None or before is None:
            return None
        elapsed = now - self.previous.at
        return max(0.0, (value - before) / elapsed) if elapsed > 0 else None

    def _partitions(self, reading: Reading
                    ) -> tuple[dict[tuple[str, int], Row], dict[str, list[Row]]]:
        """The partitions' rows, and the same rows by topic (for the topics' sums)."""
        # 10,000 rows a cycle at scale: the reading's dicts are looked up once each, by the
        # TopicPartition that also keys the row (a tuple, equal to (topic, partition)).
        rows: dict[tuple[str, int], Row] = {}
        by_topic: dict[str, list[Row]] = {}
        before = self.previous.log_end if self.previous else {}
        elapsed = reading.at - self.previous.at if self.previous else 0.0
        ends, starts, sizes, stale = (reading.log_end, reading.log_start, reading.log_size,
                                      reading.stale)
        for topic in reading.metadata.topics.values():
            name = topic.name
            min_isr = reading.min_isr.get(name, 1)
            parts = by_topic[name] = []
            for p in topic.partitions:
                tp = TopicPartition(name, p.partition)
                end = ends.get(tp)
                offline = p.leader == -1  # PartitionMetadata's properties, inlined: 10,000 a
                isr, replicas = p.isr, p.replicas  # cycle
                row = rows[tp] = {
                    "leader": None if offline else p.leader,
                    "replicas": list(replicas), "isr": list(isr),
                    "offline": offline, "under_replicated": len(isr) < len(replicas),
                    "under_min_isr": not offline and len(isr) < min_isr,
                    "log_start_offset": starts.get(tp), "log_end_offset": end,
                    "size_bytes": sizes.get(tp),
                    "messages_in_per_sec": (None if tp in stale
                                            else _per_second(end, before.get(tp), elapsed)),
                }
                parts.append(row)
        return rows, by_topic

    def _topics(self, reading: Reading, by_topic: dict[str, list[Row]]) -> dict[str, Row]:
        bytes_in = self._topic_bytes_in(reading)
        rows = {}
        for name, topic in reading.metadata.topics.items():
            parts = by_topic.get(name, [])
            rates = [r["messages_in_per_sec"] for r in parts
                     if r["messages_in_per_sec"] is not None]
            rows[name] = {
                "internal": topic.internal or name in PLATFORM_TOPICS,
                "partitions": len(topic.partitions),
                "replication_factor": max((len(p.replicas) for p in topic.partitions), default=0),
                "under_replicated": sum(r["under_replicated"] for r in parts),
                "offline": sum(r["offline"] for r in parts),
                "under_min_isr": sum(r["under_min_isr"] for r in parts),
                "min_insync_replicas": reading.min_isr.get(name),
                "total_messages": sum((r["log_end_offset"] or 0) - (r["log_start_offset"] or 0)
                                      for r in parts),
                "size_bytes": _total([r["size_bytes"] for r in parts]),
                "messages_in_per_sec": sum(rates) if rates else None,
                "bytes_in_per_sec": bytes_in.get(name),
            }
        return rows

    def _topic_bytes_in(self, reading: Reading) -> dict[str, float]:
        if self.previous is None or not reading.broker_counters:
            return {}
        elapsed = reading.at - self.previous.at
        totals: defaultdict[str, float] = defaultdict(float)
        for node, counters in reading.broker_counters.items():
            before = self.previous.broker_counters.get(node, {})
            for key, value in counters.items():
                if key.startswith(TOPIC_BYTES_IN) and elapsed > 0:
                    # A restarted broker's counters start again at 0: count it as no traffic.
                    delta = value - before.get(key, value)
                    totals[key[len(TOPIC_BYTES_IN):]] += max(0.0, delta) / elapsed
        return dict(totals)

    # --- brokers ----------------------------------------------------------------------------

    def _brokers(self, reading: Reading) -> dict[int, Row]:
        meta = reading.metadata
        leaders = meta.leaders()
        replicas: defaultdict[int, int] = defaultdict(int)
        for p in meta.partitions:
            for node in p.replicas:
                replicas[node] += 1
        listed = {b.node_id: b for b in meta.brokers}
        processes = reading.processes or {}
        rows = {}
        for node in sorted(set(listed) | set(self.known_brokers) | set(processes)):
            broker = listed.get(node)
            process = processes.get(node)
            known = self.known_brokers.get(node, {})
            rows[node] = {
                "host": broker.host if broker else known.get("host", "127.0.0.1"),
                "port": broker.port if broker else known.get("port", _port(process)),
                "rack": None,
                "status": _broker_status(broker is not None, process),
                "is_controller": False,
                "partitions": replicas.get(node, 0), "leaders": leaders.get(node, 0),
                **self._broker_rates(reading, node),
                "process_state": process.state.value if process else None,
            }
        active = [n for n, c in reading.broker_counters.items() if c.get("active_controller")]
        controller = active[0] if len(active) == 1 else meta.controller_id
        if controller in rows:
            rows[controller]["is_controller"] = True
        self.known_brokers = rows
        return rows

    def _broker_rates(self, reading: Reading, node: int) -> Row:
        now = reading.broker_counters.get(node, {})
        before = self.previous.broker_counters.get(node, {}) if self.previous else {}
        rates = {}
        for name in ("bytes_in", "bytes_out", "messages_in"):
            rate = self._rate(reading.at, now.get(name), before.get(name))
            rates[f"{name}_per_sec"] = rate
        return rates

    def _cluster(self, reading: Reading, partitions: dict[tuple[str, int], Row],
                 brokers: dict[int, Row], groups: dict[str, Row]) -> Row:
        led = [r for r in partitions.values() if r["leader"] is not None and r["replicas"]]
        counters = reading.broker_counters
        controller = next((n for n, r in brokers.items() if r["is_controller"]), None)
        return {
            "cluster_id": reading.metadata.cluster_id, "controller_id": controller,
            "brokers": sum(1 for r in brokers.values() if r["status"] == "up"),
            "topics": len(reading.metadata.topics), "partitions": len(partitions),
            "under_replicated": sum(r["under_replicated"] for r in partitions.values()),
            "offline": sum(r["offline"] for r in partitions.values()),
            "under_min_isr": sum(r["under_min_isr"] for r in partitions.values()),
            "groups": len(groups),
            "active_controller_count": (int(sum(c.get("active_controller", 0)
                                                for c in counters.values()))
                                        if counters else None),
            "preferred_leader_ratio": (sum(r["leader"] == r["replicas"][0] for r in led) / len(led)
                                       if led else None),
        }

    # --- consumer groups --------------------------------------------------------------------

    def _groups(self, reading: Reading) -> tuple[dict[str, Row], dict[GTP, Row], list[LagSample]]:
        """Every group's row, its partitions' rows and their lag samples. clusterclient's
        group_lag, Burrow's window and status and the lookup table's seconds per partition,
        in one loop: 10,000 group partitions a cycle at scale, where a PartitionLag, a
        status dict and a call per step per partition were half the analysis."""
        ends, stale, stale_groups = reading.log_end, reading.stale, reading.stale_groups
        at, tables, thresholds, windows = reading.at, self.tables, self.thresholds, self.windows
        at_ms = int(at * 1000)
        kept: dict[GTP, PartitionWindow] = {}  # the windows of partitions seen this cycle
        empty = PartitionWindow()
        groups: dict[str, Row] = {}
        lags: dict[GTP, Row] = {}
        samples: list[LagSample] = []
        for group_id, group in reading.groups.items():
            committed = reading.committed.get(group_id, {})
            owners = {tp: m for m in group.members for tp in m.assignment}
            keys = sorted(committed.keys() | owners.keys()) if owners else sorted(committed)
            group_stale = group_id in stale_groups
            evaluated: list[PartitionStatus] = []
            known: list[float] = []
            total_lag = max_lag = 0
            for tp in keys:
                topic, partition = tp
                offset, end, member = committed.get(tp), ends.get(tp), owners.get(tp)
                lag = 0 if offset is None or end is None else max(0, end - offset)
                key = (group_id, topic, partition)
                window = windows.get(key, empty)
                # (committed, end) observed only when both were read this cycle: a stale end
                # (its leader did not answer) or a stale group is shown, never sampled as new
                observed = None
                if (offset is not None and end is not None and not group_stale
                        and tp not in stale):
                    observed = offset, end
                    window = window.observe(at, offset, end, owned=member is not None)
                if window is not empty:
                    kept[key] = window
                if window.samples:
                    status = partition_status(window, at, thresholds)
                    evaluated.append(status)
                else:
                    status = NOT_FOUND
                secs = None
                table = tables.get(tp)
                if table is not None and offset is not None:
                    secs = table.lag_seconds(offset, at).seconds
                    if secs is not None:
                        known.append(secs)
                name = status.status.name
                lags[key] = {
                    "committed_offset": offset, "end_offset": end,
                    "lag": lag, "lag_seconds": secs, "status": name,
                    "consumer_id": member.member_id if member else "",
                    "client_id": member.client_id if member else "",
                    "host": member.host if member else "",
                }
                total_lag += lag
                if lag > max_lag:
                    max_lag = lag
                if observed is not None:
                    samples.append(LagSample(group_id, topic, partition, at_ms, *observed, lag,
                                             secs, status.status))
            overall, complete = group_verdict(evaluated)
            members = group.members
            groups[group_id] = {
                "group_type": group.type.value, "state": group.state.value,
                "protocol_type": "" if group.is_simple else "consumer",
                "protocol": group.partition_assignor or "", "members": len(members),
                "reconciling": sum(m.reconciling for m in members),
                "coordinator": group.coordinator.node_id if group.coordinator else None,
                "topics": len({tp[0] for tp in keys}), "partitions": len(keys),
                "total_lag": total_lag, "max_lag": max_lag,
                "max_lag_seconds": max(known) if known else None,
                "status": overall.name, "complete": complete,
            }
        self.windows = kept
        return groups, lags, samples


def _per_second(value: int | None, before: int | None, elapsed: float) -> float | None:
    """The rate between two readings `elapsed` seconds apart (None without both, or no time
    between them); a counter that went down counts as no traffic."""
    if value is None or before is None or elapsed <= 0:
        return None
    return max(0.0, (value - before) / elapsed)


def _total(values: list[Any]) -> Any:
    """The sum, or None when no value is known (an external cluster has no size metrics)."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _port(process: BrokerProcess | None) -> int:
    return process.kafka_port if process else 0


def _broker_status(listed: bool, process: BrokerProcess | None) -> str:
    if listed:
        return "up"
    if process is not None and process.alive:
        return "fenced"  # its process runs, but the cluster does not count it in
    return "down"
