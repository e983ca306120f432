"""`python manage.py collect`: the platform's one collector (README.md, "The collector").

Samples the cluster of KAFKA_BOOTSTRAP_SERVERS every MILLRACE_COLLECT_INTERVAL_S into the read
model, the history topics and the live websocket groups, and serves kafka-lag-exporter's
metrics on MILLRACE_COLLECTOR_METRICS_PORT. `manage.py platform` starts and supervises it.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

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

    def handle(self, *args: Any, **opts: Any) -> None:
        cluster_dir = Path(settings.MILLRACE_CLUSTER_DIR)
        collector = Collector(CollectorConfig(
            bootstrap_servers=settings.KAFKA_BOOTSTRAP_SERVERS, interval=opts["interval"],
            supervisor_dir=cluster_dir if cluster_dir.is_dir() else None,
            retention=Policy.parse(settings.MILLRACE_LAG_HISTORY_RETENTION),
            cluster_name=settings.MILLRACE_CLUSTER_NAME,
            client_config=settings.KAFKA_CLIENT_CONFIG))
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
            self.stdout.write(f"millrace collector ready: {settings.KAFKA_BOOTSTRAP_SERVERS} every "
                              f"{opts['interval']}s, metrics on port {opts['metrics_port']}")
            self.stdout.flush()
            collector.run(stop)
        finally:
            collector.close()
