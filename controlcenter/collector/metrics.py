"""The lag as Prometheus metrics under kafka-lag-exporter's names and labels, so an existing
Grafana dashboard for kafka-lag-exporter works against the collector's port unchanged."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric

from .analysis import Snapshot

PARTITION_LABELS = ["cluster_name", "group", "topic", "partition", "member_host", "consumer_id",
                    "client_id"]


class LagMetrics:
    """A Prometheus collector over the latest snapshot (replaced once per cycle)."""

    def __init__(self, cluster_name: str) -> None:
        self.cluster_name = cluster_name
        self.snapshot: Snapshot | None = None

    def collect(self) -> Iterator[Metric]:
        snap = self.snapshot
        if snap is None:
            return
        yield from self._partition_metrics(snap)
        yield from self._group_metrics(snap)
        latest = GaugeMetricFamily("kafka_partition_latest_offset", "Latest offset of a partition",
                                   labels=["cluster_name", "topic", "partition"])
        earliest = GaugeMetricFamily("kafka_partition_earliest_offset",
                                     "Earliest offset of a partition",
                                     labels=["cluster_name", "topic", "partition"])
        for (topic, partition), row in snap.partitions.items():
            labels = [self.cluster_name, topic, str(partition)]
            if row["log_end_offset"] is not None:
                latest.add_metric(labels, row["log_end_offset"])
            if row["log_start_offset"] is not None:
                earliest.add_metric(labels, row["log_start_offset"])
        yield latest
        yield earliest

    def _partition_metrics(self, snap: Snapshot) -> Iterator[Metric]:
        offset = GaugeMetricFamily("kafka_consumergroup_group_offset",
                                   "Last group consumed offset of a partition",
                                   labels=PARTITION_LABELS)
        lag = GaugeMetricFamily("kafka_consumergroup_group_lag",
                                "Group offset lag of a partition", labels=PARTITION_LABELS)
        seconds = GaugeMetricFamily("kafka_consumergroup_group_lag_seconds",
                                    "Group time lag of a partition", labels=PARTITION_LABELS)
        for (group, topic, partition), row in snap.group_partitions.items():
            labels = [self.cluster_name, group, topic, str(partition), row["host"],
                      row["consumer_id"], row["client_id"]]
            if row["committed_offset"] is not None:
                offset.add_metric(labels, row["committed_offset"])
                lag.add_metric(labels, row["lag"])
            if row["lag_seconds"] is not None:
                seconds.add_metric(labels, row["lag_seconds"])
        yield offset
        yield lag
        yield seconds

    def _group_metrics(self, snap: Snapshot) -> Iterator[Metric]:
        labels = ["cluster_name", "group"]
        max_lag = GaugeMetricFamily("kafka_consumergroup_group_max_lag",
                                    "Max group offset lag", labels=labels)
        max_seconds = GaugeMetricFamily("kafka_consumergroup_group_max_lag_seconds",
                                        "Max group time lag", labels=labels)
        sum_lag = GaugeMetricFamily("kafka_consumergroup_group_sum_lag",
                                    "Sum of group offset lag", labels=labels)
        topic_sum = GaugeMetricFamily("kafka_consumergroup_group_topic_sum_lag",
                                      "Sum of group offset lag across topic partitions",
                                      labels=["cluster_name", "group", "topic"])
        for group, row in snap.groups.items():
            max_lag.add_metric([self.cluster_name, group], row["max_lag"])
            sum_lag.add_metric([self.cluster_name, group], row["total_lag"])
            if row["max_lag_seconds"] is not None:
                max_seconds.add_metric([self.cluster_name, group], row["max_lag_seconds"])
        by_topic: defaultdict[tuple[str, str], int] = defaultdict(int)
        for (group, topic, _), row in snap.group_partitions.items():
            by_topic[(group, topic)] += row["lag"]
        for (group, topic), total in sorted(by_topic.items()):
            topic_sum.add_metric([self.cluster_name, group, topic], total)
        yield from (max_lag, max_seconds, sum_lag, topic_sum)


def serve(metrics: LagMetrics, host: str, port: int) -> None:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    start_http_server(port, addr=host, registry=registry)
