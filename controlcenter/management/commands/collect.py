"""`python manage.py collect`: the platform's one collector (README.md, "The collector").

Samples one cluster (the default, KAFKA_BOOTSTRAP_SERVERS, or `--cluster NAME` of the
configured ones: one collector process per cluster, its rows keyed by that name) every
MILLRACE_COLLECT_INTERVAL_S into the read model, the history topics and the live websocket
groups, and serves kafka-lag-exporter's metrics on MILLRACE_COLLECTOR_METRICS_PORT.
`manage.py platform` starts and supervises one for each cluster.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from clusterclient.clusters import by_name
from controlcenter import clusters
from controlcenter.collector.loop import Collector, CollectorConfig
from controlcenter.collector.metrics import serve
from laganalysis.retention import Policy


class Command(BaseCommand):
    help = "Sample the Kafka cluster into the control center's tables, every interval."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--interval", type=float, default=settings.MILLRACE_COLLECT_INTERVAL_S)
        parser.add_argument("--metrics-port", type=int,
                            default=settings.MILLRACE_COLLECTOR_METRICS_PORT,
                            help="kafka-lag-exporter metrics port (0: none)")
        parser.add_argument("--once", action="store_true", help="one cycle, then exit")
        parser.add_argument("--cluster", default=None,
                            help="the configured cluster to sample (default: the default one)")

    def handle(self, *args: Any, **opts: Any) -> None:
        configured = clusters.configured()
        cluster = by_name(configured, opts["cluster"] or configured[0].name)
        if cluster is None:
            raise CommandError(f"no cluster {opts['cluster']!r}; configured: "
                               f"{', '.join(c.name for c in configured)}")
        clusters.activate_process(cluster.name)  # every row and read is this cluster's
        cluster_dir = Path(cluster.supervisor_dir) if cluster.supervisor_dir else None
        collector = Collector(CollectorConfig(
            bootstrap_servers=cluster.bootstrap_servers, interval=opts["interval"],
            supervisor_dir=cluster_dir if cluster_dir and cluster_dir.is_dir() else None,
            retention=Policy.parse(settings.MILLRACE_LAG_HISTORY_RETENTION),
            cluster_name=cluster.name, client_config=cluster.config))
        try:
            if opts["once"]:
                took = collector.cycle()
                collector.pusher.wait()  # its live pushes too, before close drops them
                self.stdout.write(f"one cycle in {took:.3f}s")
                return
            if opts["metrics_port"]:
                serve(collector.metrics, settings.MILLRACE_COLLECTOR_METRICS_HOST,
                      opts["metrics_port"])
            stop = threading.Event()
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: stop.set())
            self.stdout.write(f"millrace collector ready: {cluster.bootstrap_servers} every "
                              f"{opts['interval']}s, metrics on port {opts['metrics_port']}")
            self.stdout.flush()
            collector.run(stop)
        finally:
            collector.close()
