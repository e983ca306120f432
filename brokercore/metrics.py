"""Prometheus metrics for one broker, named as jmx_exporter names Kafka's MBeans.

Kafka dashboards are written against the names Prometheus's jmx_exporter gives Kafka's
MBeans under its common Kafka rules (lower-cased): a gauge `kafka.server:type=ReplicaManager,
name=UnderReplicatedPartitions` becomes `kafka_server_replicamanager_underreplicatedpartitions`,
and a meter `kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=T` becomes the
counter `kafka_server_brokertopicmetrics_bytesin_total{topic="T"}`. We serve those names, so
the same dashboards and alerts work here unchanged.

`BrokerCollector` reads the broker's state when a scrape comes in, and `MetricsServer`
answers scrapes on the broker's own asyncio loop, so a scrape never races the loop that
changes that state.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from brokercore.config import BrokerConfig
from brokercore.controller.controller import Controller
from brokercore.handlers.fetch_sessions import FetchSessionCache
from brokercore.replication.replica_manager import ReplicaManager
from brokercore.tcp_server import TcpServer

log = logging.getLogger(__name__)

HEADER_TIMEOUT = 10.0  # seconds a scraper may take to send its request headers
# Every name here is a classic Prometheus name, so the classic text format carries them and
# every Prometheus version reads it (newer clients default to version 1.0.0).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class BrokerCollector(Collector):
    """Every metric, computed from the broker's image and partitions at scrape time."""

    def __init__(self, node_id: int, replicas: ReplicaManager, controller: Controller,
                 fetch_sessions: FetchSessionCache) -> None:
        self.node_id = node_id
        self.replicas = replicas
        self.controller = controller
        self.fetch_sessions = fetch_sessions

    def collect(self) -> Iterator[Metric]:
        yield from self._replica_manager()
        yield from self._fetch_session_cache()
        yield from self._controller()
        yield from self._topic_counters()
        yield self._log_sizes()

    def _replica_manager(self) -> Iterator[Metric]:
        node = self.node_id
        counts = {"partitioncount": 0, "leadercount": 0, "underreplicatedpartitions": 0,
                  "underminisrpartitioncount": 0, "atminisrpartitioncount": 0}
        for topic in self.controller.image.topics.values():
            min_isr = self.replicas.topic_configs.min_insync_replicas(topic.name)
            for part in topic.partitions.values():
                if node in part.replicas:
                    counts["partitioncount"] += 1
                if part.leader != node:
                    continue  # as in Kafka, only the leader reports a partition's ISR health
                counts["leadercount"] += 1
                # During a reassignment the replicas being removed don't count as missing.
                if len(part.isr) < len(part.replicas) - len(part.removing_replicas):
                    counts["underreplicatedpartitions"] += 1
                if len(part.isr) < min_isr:
                    counts["underminisrpartitioncount"] += 1
                elif len(part.isr) == min_isr:
                    counts["atminisrpartitioncount"] += 1
        for name, value in counts.items():
            yield GaugeMetricFamily(f"kafka_server_replicamanager_{name}",
                                    f"ReplicaManager {name} of this broker", value=value)

    def _fetch_session_cache(self) -> Iterator[Metric]:
        """Kafka's kafka.server:type=FetchSessionCache gauges (KIP-227)."""
        sessions = self.fetch_sessions.sessions.values()
        yield GaugeMetricFamily("kafka_server_fetchsessioncache_numincrementalfetchsessions",
                                "Fetch sessions this broker holds", value=len(sessions))
        yield GaugeMetricFamily(
            "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
            "Partitions held over all fetch sessions",
            value=sum(len(s.partitions) for s in sessions))

    def _controller(self) -> Iterator[Metric]:
        # Cluster-wide counts come from the active controller only, every other node says 0,
        # so that summing over brokers (what dashboards do) counts each partition once.
        image = self.controller.image
        active = self.controller.active_controller_id == self.node_id
        parts = [p for t in image.topics.values() for p in t.partitions.values()]
        fenced = sum(1 for b in image.brokers.values() if b.fenced)
        values = {
            "activecontrollercount": 1,
            "offlinepartitionscount": sum(1 for p in parts if p.leader == -1),
            "preferredreplicaimbalancecount": sum(
                1 for p in parts if p.replicas and p.leader != p.replicas[0]),
            "globalpartitioncount": len(parts),
            "globaltopiccount": len(image.topics),
            "fencedbrokercount": fenced,
            "activebrokercount": len(image.brokers) - fenced,
        }
        for name, value in values.items():
            yield GaugeMetricFamily(f"kafka_controller_kafkacontroller_{name}",
                                    f"KafkaController {name}", value=value if active else 0)

    def _topic_counters(self) -> Iterator[Metric]:
        totals: dict[str, dict[str, int]] = {}
        for tp, partition in self.replicas.partitions.items():
            topic = totals.setdefault(tp.topic, {"bytesin": 0, "bytesout": 0, "messagesin": 0})
            topic["bytesin"] += partition.bytes_in
            topic["bytesout"] += partition.bytes_out
            topic["messagesin"] += partition.messages_in
        for name in ("bytesin", "bytesout", "messagesin"):
            family = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}",
                                         f"BrokerTopicMetrics {name}PerSec count",
                                         labels=["topic"])
            # Kafka also has the all-topics meter: the same MBean without a topic.
            family.samples.append(Sample(f"{family.name}_total", {},
                                         sum(c[name] for c in totals.values())))
            for topic_name, counters in sorted(totals.items()):
                family.add_metric([topic_name], counters[name])
            yield family


    def _log_sizes(self) -> Metric:
        # kafka.log:type=Log,name=Size,topic=T,partition=P: every replica reports its own log.
        family = GaugeMetricFamily("kafka_log_log_size", "Log Size in bytes",
                                   labels=["topic", "partition"])
        for tp, partition in self.replicas.partitions.items():
            family.add_metric([tp.topic, str(tp.partition)], partition.log.size_in_bytes)
        return family


class MetricsServer(TcpServer):
    """`GET /metrics` over HTTP/1.1 on the broker's loop; one response per connection."""

    def __init__(self, collector: BrokerCollector, host: str, port: int) -> None:
        super().__init__(host, port)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEADER_TIMEOUT)
        except (TimeoutError, asyncio.LimitOverrunError):
            return  # a scraper that stalled or sent nonsense: only its connection ends
        status, content_type, body = self._respond(head)
        writer.write(
            f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body
        )
        await writer.drain()

    def _respond(self, head: bytes) -> tuple[str, str, bytes]:
        parts = head.split(b"\r\n", 1)[0].split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/"):
            return "400 Bad Request", "text/plain", b"Bad request\n"
        method, target = parts[0], parts[1].split(b"?", 1)[0]
        if method != b"GET":
            return "405 Method Not Allowed", "text/plain", b"Only GET\n"
        if target not in (b"/metrics", b"/"):
            return "404 Not Found", "text/plain", b"Metrics are at /metrics\n"
        return "200 OK", CONTENT_TYPE, generate_latest(self.registry)


async def start_metrics_server(
    config: BrokerConfig, replicas: ReplicaManager, controller: Controller,
    fetch_sessions: FetchSessionCache,
) -> MetricsServer | None:
    """Serve metrics at `metrics.http.listener` (host:port); None when it is unset."""
    listener = config.get("metrics.http.listener")
    if not listener:
        return None
    host, _, port = listener.rpartition(":")
    collector = BrokerCollector(config.node_id, replicas, controller, fetch_sessions)
    server = MetricsServer(collector, host.strip("[]") or "0.0.0.0", int(port))
    bound = await server.start()
    log.info("node %d: serving Prometheus metrics on %s:%d/metrics", config.node_id, host, bound)
    return server
