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
from clusterclient import ConsumerGroup, PartitionLag, TopicPartition, group_lag
from clusterclient.offsets import ListedOffset, ListOffsetsResult
from controlcenter.collector.sampler import TOPIC_BYTES_IN, Reading
from laganalysis.burrow import PartitionStatus, Status, Thresholds, group_status, partition_status
from laganalysis.records import TOPIC_SETTINGS, LagSample
from laganalysis.timelag import LookupTable, Point
from laganalysis.window import PartitionWindow

Row = dict[str, Any]
# The platform's own topics (the history topics, one "_") are internal like Kafka's "__"
# ones: listed last and hidden by default, so they never lead a fresh platform's pages.
PLATFORM_TOPICS = frozenset(TOPIC_SETTINGS)
GTP = tuple[str, str, int]


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
        for tp, end in reading.log_end.items():
            if tp in reading.stale:
                continue  # the last good end, not one read at this time
            table = self.tables.get(tp, LookupTable())
            self.tables[tp] = table.add(Point(end, reading.at))[0]
        for gone in set(self.tables) - set(reading.log_end):
            del self.tables[gone]
        partitions = self._partitions(reading)
        topics = self._topics(reading, partitions)
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

    def _partitions(self, reading: Reading) -> dict[tuple[str, int], Row]:
        rows = {}
        before = self.previous.log_end if self.previous else {}
        for topic in reading.metadata.topics.values():
            min_isr = reading.min_isr.get(topic.name, 1)
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition)
                end = reading.log_end.get(tp)
                rate = None if tp in reading.stale else self._rate(reading.at, end,
                                                                   before.get(tp))
                rows[(topic.name, p.partition)] = {
                    "leader": None if p.offline else p.leader,
                    "replicas": list(p.replicas), "isr": list(p.isr),
                    "offline": p.offline, "under_replicated": p.under_replicated,
                    "under_min_isr": not p.offline and len(p.isr) < min_isr,
                    "log_start_offset": reading.log_start.get(tp), "log_end_offset": end,
                    "size_bytes": reading.log_size.get(tp),
                    "messages_in_per_sec": rate,
                }
        return rows

    def _topics(self, reading: Reading, partitions: dict[tuple[str, int], Row]
                ) -> dict[str, Row]:
        by_topic: defaultdict[str, list[Row]] = defaultdict(list)
        for (topic_name, _), row in partitions.items():
            by_topic[topic_name].append(row)
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
        ends = ListOffsetsResult({tp: ListedOffset(o, -1, None)
                                  for tp, o in reading.log_end.items()})
        groups: dict[str, Row] = {}
        lags: dict[GTP, Row] = {}
        samples: list[LagSample] = []
        seen: set[GTP] = set()
        for group_id, group in reading.groups.items():
            lag = group_lag(group, reading.committed.get(group_id, {}), ends)
            statuses: dict[GTP, PartitionStatus] = {}
            seconds: dict[GTP, float | None] = {}
            for part in lag.partitions:
                key = (group_id, part.topic, part.partition)
                seen.add(key)
                observed = _observed(reading, group_id, part)
                row, status, secs = self._partition_lag(reading, key, part, observed)
                lags[key], statuses[key], seconds[key] = row, status, secs
                if observed is not None:
                    samples.append(LagSample(group_id, part.topic, part.partition,
                                             int(reading.at * 1000), *observed, row["lag"],
                                             secs, status.status))
            groups[group_id] = self._group_row(group, lag.partitions, statuses, seconds)
        for gone in set(self.windows) - seen:
            del self.windows[gone]
        return groups, lags, samples

    def _partition_lag(self, reading: Reading, key: GTP, part: Any,
                       observed: tuple[int, int] | None
                       ) -> tuple[Row, PartitionStatus, float | None]:
        tp = TopicPartition(key[1], key[2])
        window = self.windows.get(key, PartitionWindow())
        if observed is not None:
            window = window.observe(reading.at, *observed, owned=part.member is not None)
            self.windows[key] = window
        status = partition_status(window, reading.at, self.thresholds)
        if not window.samples:
            status = PartitionStatus(Status.NOTFOUND, 0.0, 0)
        secs = None
        table = self.tables.get(tp)
        if table is not None and part.committed_offset is not None:
            secs = table.lag_seconds(part.committed_offset, reading.at).seconds
        member = part.member
        row = {
            "committed_offset": part.committed_offset, "end_offset": part.log_end_offset,
            "lag": part.lag or 0, "lag_seconds": secs, "status": status.status.name,
            "consumer_id": member.member_id if member else "",
            "client_id": member.client_id if member else "",
            "host": member.host if member else "",
        }
        return row, status, secs

    def _group_row(self, group: ConsumerGroup, parts: Any, statuses: dict[GTP, PartitionStatus],
                   seconds: dict[GTP, float | None]) -> Row:
        evaluated = {k: s for k, s in statuses.items() if s.status is not Status.NOTFOUND}
        overall = group_status(evaluated)
        known = [s for s in seconds.values() if s is not None]
        return {
            "group_type": group.type.value, "state": group.state.value,
            "protocol_type": "" if group.is_simple else "consumer",
            "protocol": group.partition_assignor or "", "members": len(group.members),
            "reconciling": sum(m.reconciling for m in group.members),
            "coordinator": group.coordinator.node_id if group.coordinator else None,
            "topics": len({p.topic for p in parts}), "partitions": len(parts),
            "total_lag": sum(p.lag or 0 for p in parts),
            "max_lag": max((p.lag or 0 for p in parts), default=0),
            "max_lag_seconds": max(known) if known else None,
            "status": overall.status.name, "complete": overall.complete,
        }


def _observed(reading: Reading, group_id: str, part: PartitionLag) -> tuple[int, int] | None:
    """(committed, end) when both were read this cycle: a stale end (its leader did not
    answer) or a stale group is shown, never observed or sampled as new."""
    if (part.committed_offset is None or part.log_end_offset is None
            or group_id in reading.stale_groups):
        return None
    if TopicPartition(part.topic, part.partition) in reading.stale:
        return None
    return part.committed_offset, part.log_end_offset


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
