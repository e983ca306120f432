"""The lag as Prometheus metrics under kafka-lag-exporter's names and labels, so an existing
Grafana dashboard for kafka-lag-exporter works against the collector's port unchanged.

Every configured cluster is on the one endpoint, told apart by the `cluster_name` label, as
kafka-lag-exporter does with several `kafka-lag-exporter.clusters` (and Prometheus users
filter with `{cluster_name="millrace-2"}` rather than scrape one port per cluster): the
collector's own cluster from its last cycle in memory, every other one from the read model
as that cluster's collector last wrote it (`read_model_lag`). A cluster whose collector has
not written a good cycle for three intervals (at least STALE_AFTER_S) has no series, as an
exporter that cannot reach a cluster has none: a stopped collector's last values would
otherwise read as a steady lag.

With MILLRACE_HTTP_AUTH on, a scrape needs credentials as the JSON API does: an API token
(`Authorization: Bearer <key>`, Prometheus' `authorization` block, or `Token <key>`) or
HTTP Basic of a cluster SCRAM user (Prometheus' `basic_auth`); without, 401 in the API's
JSON error shape with `WWW-Authenticate: Basic`."""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone
from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import GaugeMetricFamily, Metric

import httpauth
from apierrors import ApiError
from controlcenter import apitokens, clusters

from .analysis import Snapshot

STALE_AFTER_S = 60.0
PARTITION_LABELS = ["cluster_name", "group", "topic", "partition", "member_host", "consumer_id",
                    "client_id"]


@dataclass(frozen=True)
class ClusterLag:
    """One cluster's rows for the metrics, keyed as a Snapshot's (the rows' keys are the
    read model's column names)."""

    name: str
    partitions: Mapping[tuple[str, int], Mapping[str, Any]]
    groups: Mapping[str, Mapping[str, Any]]
    group_partitions: Mapping[tuple[str, str, int], Mapping[str, Any]]


def read_model_lag(name: str) -> ClusterLag:
    """Another cluster's rows, as its collector last wrote them to the read model."""
    from controlcenter.models import ClusterState, GroupPartitionLag, GroupState, PartitionState

    close_old_connections()  # a scrape thread's connection, as a request's
    try:
        with clusters.using(name):
            state = ClusterState.current()
            if state is None or state.collected_at is None or (
                    timezone.now() - state.collected_at).total_seconds() > max(
                    STALE_AFTER_S, 3 * state.interval_seconds) or not state.reachable:
                return ClusterLag(name, {}, {}, {})
            partitions = {(r["topic"], r["partition"]): r for r in PartitionState.objects.values(
                "topic", "partition", "log_start_offset", "log_end_offset")}
            groups = {r["group_id"]: r for r in GroupState.objects.values(
                "group_id", "max_lag", "total_lag", "max_lag_seconds")}
            lags = {(r["group_id"], r["topic"], r["partition"]): r
                    for r in GroupPartitionLag.objects.values(
                        "group_id", "topic", "partition", "committed_offset", "lag",
                        "lag_seconds", "host", "consumer_id", "client_id")}
    finally:
        close_old_connections()
    return ClusterLag(name, partitions, groups, lags)


def other_clusters(own: str) -> list[str]:
    return [c.name for c in clusters.configured() if c.name != own]


class LagMetrics:
    """A Prometheus collector over the latest snapshot (replaced once per cycle) and the
    other configured clusters' read-model rows (`others`: their names, at each scrape)."""

    def __init__(self, cluster_name: str,
                 others: Callable[[str], list[str]] = other_clusters) -> None:
        self.cluster_name = cluster_name
        self.others = others
        self.snapshot: Snapshot | None = None

    def views(self) -> list[ClusterLag]:
        snap = self.snapshot
        own = [] if snap is None else [ClusterLag(self.cluster_name, snap.partitions,
                                                  snap.groups, snap.group_partitions)]
        return own + [read_model_lag(name) for name in self.others(self.cluster_name)]

    def collect(self) -> Iterator[Metric]:
        views = self.views()
        if not views:
            return
        yield from _partition_metrics(views)
        yield from _group_metrics(views)
        latest = GaugeMetricFamily("kafka_partition_latest_offset", "Latest offset of a partition",
                                   labels=["cluster_name", "topic", "partition"])
        earliest = GaugeMetricFamily("kafka_partition_earliest_offset",
                                     "Earliest offset of a partition",
                                     labels=["cluster_name", "topic", "partition"])
        for view in views:
            for (topic, partition), row in view.partitions.items():
                labels = [view.name, topic, str(partition)]
                if row["log_end_offset"] is not None:
                    latest.add_metric(labels, row["log_end_offset"])
                if row["log_start_offset"] is not None:
                    earliest.add_metric(labels, row["log_start_offset"])
        yield latest
        yield earliest


def _partition_metrics(views: list[ClusterLag]) -> Iterator[Metric]:
    offset = GaugeMetricFamily("kafka_consumergroup_group_offset",
                               "Last group consumed offset of a partition",
                               labels=PARTITION_LABELS)
    lag = GaugeMetricFamily("kafka_consumergroup_group_lag",
                            "Group offset lag of a partition", labels=PARTITION_LABELS)
    seconds = GaugeMetricFamily("kafka_consumergroup_group_lag_seconds",
                                "Group time lag of a partition", labels=PARTITION_LABELS)
    for view in views:
        for (group, topic, partition), row in view.group_partitions.items():
            labels = [view.name, group, topic, str(partition), row["host"],
                      row["consumer_id"], row["client_id"]]
            if row["committed_offset"] is not None:
                offset.add_metric(labels, row["committed_offset"])
                lag.add_metric(labels, row["lag"])
            if row["lag_seconds"] is not None:
                seconds.add_metric(labels, row["lag_seconds"])
    yield offset
    yield lag
    yield seconds


def _group_metrics(views: list[ClusterLag]) -> Iterator[Metric]:
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
    for view in views:
        for group, row in view.groups.items():
            max_lag.add_metric([view.name, group], row["max_lag"])
            sum_lag.add_metric([view.name, group], row["total_lag"])
            if row["max_lag_seconds"] is not None:
                max_seconds.add_metric([view.name, group], row["max_lag_seconds"])
        by_topic: defaultdict[tuple[str, str], int] = defaultdict(int)
        for (group, topic, _), row in view.group_partitions.items():
            by_topic[(group, topic)] += row["lag"]
        for (group, topic), total in sorted(by_topic.items()):
            topic_sum.add_metric([view.name, group, topic], total)
    yield from (max_lag, max_seconds, sum_lag, topic_sum)


def serve(metrics: LagMetrics, host: str, port: int) -> WSGIServer:
    """Serve the metrics on a daemon thread (prometheus_client's WSGI app, behind the
    credentials check when HTTP auth is on)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    app = guarded(make_wsgi_app(registry))
    server = make_server(host, port, app, _ThreadingServer, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="lag-metrics", daemon=True).start()
    return server


Wsgi = Any  # a WSGI application: (environ, start_response) -> iterable of bytes


def guarded(app: Wsgi) -> Wsgi:
    def check(environ: dict[str, Any], start_response: Any) -> Any:
        if httpauth.enabled():
            try:
                _authenticate(environ.get("HTTP_AUTHORIZATION"))
            except ApiError as error:
                headers = [("Content-Type", "application/json")]
                if error.status == 401:
                    headers.append(("WWW-Authenticate", f'Basic realm="{_realm()}"'))
                start_response(f"{error.status} {_REASONS[error.status]}", headers)
                return [json.dumps(error.body()).encode()]
        return app(environ, start_response)

    return check


_REASONS = {401: "Unauthorized", 403: "Forbidden", 503: "Service Unavailable"}


def _realm() -> str:
    return str(settings.MILLRACE_HTTP_AUTH_REALM)


def _authenticate(header: str | None) -> None:
    """Accept an API token or a cluster user's Basic credentials; else raise."""
    key = apitokens.key_of(header)
    if key is None:
        httpauth.authenticate(httpauth.CONTROLCENTER, header)
        return
    close_old_connections()  # a scrape thread's connection, as a request's
    try:
        if apitokens.user_for(key) is None:
            raise httpauth.Unauthorized("Unauthorized: invalid token")
    finally:
        close_old_connections()


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not logged (one every few seconds)."""
