"""Collector: one cycle every interval, and what happens when the cluster stops answering."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import KafkaException
from django.db import close_old_connections

from clusterclient import ClusterClient, ClusterRequestError, ClusterUnavailable
from controlcenter import clusters, events
from laganalysis.retention import DEFAULT_POLICY, Policy

from . import clientlog, detect
from .analysis import Analyzer, Snapshot
from .history import HistoryTopics
from .metrics import LagMetrics
from .pushes import Pusher
from .sampler import Sampler
from .store import Store

log = logging.getLogger(__name__)
COMPACT_EVERY_S = 60.0


@dataclass(frozen=True)
class CollectorConfig:
    bootstrap_servers: str
    interval: float = 5.0
    supervisor_dir: Path | None = None  # the built-in cluster's data dir, if any
    retention: Policy | None = None
    cluster_name: str = ""  # "": the current cluster when the collector is made
    history_topics: bool = True
    # librdkafka keys every client adds (KAFKA_CLIENT_CONFIG: a secured cluster's login)
    client_config: Mapping[str, str] = field(default_factory=dict)
    # Pushes to browsers (banners, live rows), to this cluster's event groups (events.scoped:
    # the collector process is pinned to its cluster)
    live_pushes: bool = True


class PhaseClock:
    """Seconds spent in each step of one cycle."""

    def __init__(self) -> None:
        self.started = self.mark = time.monotonic()
        self.laps: dict[str, float] = {}

    def lap(self, name: str) -> dict[str, float]:
        now = time.monotonic()
        self.laps[name] = now - self.mark
        self.mark = now
        return self.laps

    def total(self) -> float:
        return time.monotonic() - self.started


class Collector:
    def __init__(self, config: CollectorConfig) -> None:
        self.config = config
        self.cluster_name = config.cluster_name or clusters.current_name()
        # The cycle's first request, Metadata, gets half an interval: a cluster that does not
        # answer shows as unreachable within one interval. The batched requests after it get
        # longer: at 10,000 partitions one ListOffsets can take seconds on a loaded machine,
        # and a slow answer is a long cycle (logged), not an unreachable cluster.
        # ... but not much longer: a request sent to a broker that has just died waits out
        # the whole limit before librdkafka retries on fresh metadata, and a cycle makes
        # several such requests in a row (30 s each froze the pages for 90 s after a kill).
        # Twice the interval (at least 5 s, above the brokers' session timeout) keeps a
        # 10,000-partition ListOffsets (2-4 s here) well inside it.
        probe = max(1.0, config.interval / 2)
        self.client = ClusterClient(config.bootstrap_servers, {
            **config.client_config,
            "client.id": "millrace-collector", "logger": clientlog.librdkafka,
            "reconnect.backoff.ms": 1000, "reconnect.backoff.max.ms": 30000,
        }, timeout=max(5.0, 2 * config.interval), metadata_ttl=0.0)
        self.sampler = Sampler(self.client, config.supervisor_dir, probe_timeout=probe)
        self.analyzer = Analyzer()
        self.store = Store(config.bootstrap_servers, config.retention or DEFAULT_POLICY)
        self.history = (HistoryTopics(self.client, config.client_config)
                        if config.history_topics else None)
        self.metrics = LagMetrics(self.cluster_name)
        # renders and sends what changed, off the cycle, from this cluster's rows
        self.pusher = Pusher(self.cluster_name)
        self.reachable: bool | None = None  # None until the first cycle
        self.last_compaction = 0.0
        self.cycles = 0
        self.phases: dict[str, float] = {}  # the last cycle's seconds by step
        # The last snapshot pushed to browsers. Unlike store.previous it survives an
        # unreachable spell, so the first cycle after one still pushes every topic, broker and
        # group whose rows changed meanwhile (a failover's new leaders and ISRs).
        self.published: Snapshot | None = None

    def cycle(self) -> float:
        """One sample of the cluster into every output; returns how long it took.
        `phases` says where the time went (seconds by step), for the slow-cycle log. Its rows
        and pushes are `cluster_name`'s, whatever the thread's current cluster."""
        with clusters.using(self.cluster_name):
            return self._cycle()

    def _cycle(self) -> float:
        clock = PhaseClock()
        close_old_connections()
        try:
            reading = self.sampler.read()
        except (ClusterUnavailable, ClusterRequestError, KafkaException) as exc:
            self._unreachable(str(exc))
            self._poll_clients()
            self.phases = clock.lap("read")
            return clock.total()
        clock.lap("read")
        snap = self.analyzer.analyze(reading)
        cluster_events = detect.cluster_events(self.store.previous, snap)
        changed = detect.live_changes(self.published, snap)
        clock.lap("analyze")
        self.store.write(snap, clock.total(), self.config.interval, cluster_events)
        self.metrics.snapshot = snap
        clock.lap("write")
        if self.history is not None:
            self.history.append(snap.lag_samples, cluster_events)
        self._poll_clients()
        clock.lap("history")
        if self.reachable is not True and self.config.live_pushes:
            events.publish(events.group_name(events.ALWAYS),
                           events.banner_message("ok", "cluster reachable"))
            self.reachable = True
        if self.config.live_pushes:
            self.pusher.submit(changed)
        self.published = snap
        clock.lap("publish")
        if time.time() - self.last_compaction >= COMPACT_EVERY_S:
            self.store.compact(time.time())
            self.last_compaction = time.time()
            clock.lap("compact")
        self.cycles += 1
        self.phases = clock.laps
        return clock.total()

    def _poll_clients(self) -> None:
        """librdkafka's log lines reach clientlog's logger only on poll."""
        self.client.poll()
        if self.history is not None:
            self.history.poll()

    def _unreachable(self, error: str) -> None:
        log.warning("cluster %s unreachable: %s", self.config.bootstrap_servers, error)
        self.store.write_unreachable(error, time.time())
        self.store.previous = None  # when it is back, the first cycle rewrites every row
        if self.reachable is not False and self.config.live_pushes:
            text = f"Cluster {self.config.bootstrap_servers} is not answering: {error}"
            events.publish(events.group_name(events.ALWAYS), events.banner_message("error", text))
            self.pusher.submit([("overview", None)])
            self.reachable = False

    def run(self, stop: threading.Event) -> None:
        """Cycles every interval (from start to start) until `stop` is set."""
        while not stop.is_set():
            started = time.monotonic()
            took = self.cycle()
            if took > self.config.interval:
                log.warning("collector cycle took %.2fs, longer than the %.1fs interval (%s)",
                            took, self.config.interval,
                            ", ".join(f"{k} {v:.2f}s" for k, v in self.phases.items()))
            stop.wait(max(0.0, self.config.interval - (time.monotonic() - started)))

    def close(self) -> None:
        self.pusher.close()
        if self.history is not None:
            self.history.close()
        self.sampler.close()
        self.client.close()
