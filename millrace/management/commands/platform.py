"""`python manage.py platform`: the built-in cluster and the web server, as one command.

Starts the built-in cluster, `python -m brokercluster` with 3 brokers (unless
KAFKA_BOOTSTRAP_SERVERS or --external points at an external cluster), then the web server
(`millrace.webserver`: uvicorn in MILLRACE_WEB_WORKERS processes) serving the control
center, the schema registry and the REST proxy, the collector, Celery, and a Kafka Connect
worker (`python -m connect`), waits for each to be ready,
prints the endpoints and the commands to try a failover, restarts a child that exits on its
own (three exits in a minute stop the platform), and on Ctrl-C stops everything in
reverse order.

With --secure (or MILLRACE_SECURE=1) the built-in cluster is secured (millrace/secure.py,
README "A secured platform"): SASL_SSL only, the authorizer on, the platform's services
logged in as a super user, an `admin` SCRAM user whose password is printed once, and the
control center requiring login.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from brokercluster.ports import free_base_port, free_port
from millrace import platform_cluster
from millrace.management.children import Child, http_ok
from millrace.secure import KAFKA_LISTENER, SecureFiles

# CLUSTER.md: the built-in cluster's brokers listen on the loopback interface.
CLUSTER_HOST = "127.0.0.1"
# A child that exits this often within this many seconds stops the platform (_restart).
RESTART_LIMIT = 3
RESTART_WINDOW = 60.0


class Command(BaseCommand):
    help = "Run the Millrace platform: built-in cluster, control center, registry, REST proxy."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="interface to listen on")
        parser.add_argument("--kafka-port", type=int, default=9092,
                            help="broker i serves Kafka on this port + i-1")
        parser.add_argument("--brokers", type=int, default=3, help="brokers in the cluster")
        parser.add_argument("--web-port", type=int, default=settings.WEB_PORT)
        parser.add_argument("--registry-port", type=int, default=settings.REGISTRY_PORT)
        parser.add_argument("--restproxy-port", type=int, default=settings.RESTPROXY_PORT)
        parser.add_argument("--connect-port", type=int, default=settings.CONNECT_PORT,
                            help="the Kafka Connect worker's REST API (MILLRACE_CONNECT_PORT)")
        parser.add_argument("--workers", type=int, default=settings.WEB_WORKERS,
                            help="web server processes (MILLRACE_WEB_WORKERS)")
        parser.add_argument("--any-port", action="store_true",
                            help="pick free ports instead of the conventional ones")
        parser.add_argument("--data-dir", type=Path, default=settings.DATA_DIR)
        parser.add_argument("--external", action="store_true",
                            help="use KAFKA_BOOTSTRAP_SERVERS instead of the built-in cluster")
        parser.add_argument("--secure", action="store_true", default=settings.MILLRACE_SECURE,
                            help="SASL_SSL, ACLs and logins on the built-in cluster "
                                 "(MILLRACE_SECURE=1)")

    def handle(self, *args: Any, **opts: Any) -> None:
        host: str = opts["host"]
        brokers: int = opts["brokers"]
        ports = {k: opts[k] for k in ("kafka_port", "web_port", "registry_port", "restproxy_port",
                                      "connect_port")}
        ports["collector_metrics_port"] = settings.MILLRACE_COLLECTOR_METRICS_PORT
        if opts["any_port"]:
            ports = {k: free_port(host) for k in ports}
            ports["kafka_port"] = free_base_port(brokers, CLUSTER_HOST)
        data_dir: Path = opts["data_dir"].resolve()
        external = opts["external"] or "KAFKA_BOOTSTRAP_SERVERS" in os.environ
        bootstrap = (settings.KAFKA_BOOTSTRAP_SERVERS if external else ",".join(
            f"{CLUSTER_HOST}:{ports['kafka_port'] + i}" for i in range(brokers)))
        self.secure: SecureFiles | None = None
        self.client_config: Path | None = None
        if opts["secure"]:
            if external:
                raise CommandError("--secure secures the built-in cluster; an external "
                                   "cluster's clients are configured with "
                                   "MILLRACE_KAFKA_CLIENT_CONFIG")
            self.secure = SecureFiles.ensure(data_dir)
        children = [] if external else [self._cluster(brokers, ports["kafka_port"], data_dir)]
        web = self._web(host, ports, bootstrap, data_dir, opts["workers"])
        if self.secure is not None:
            service, self.client_config = self.secure.write_client_configs(bootstrap)
            web.env.update({"MILLRACE_KAFKA_CLIENT_CONFIG": str(service),
                            "MILLRACE_UI_LOGIN_REQUIRED": "1", "MILLRACE_SECURE": "1",
                            # the registry and the proxy ask HTTP Basic of the cluster's
                            # SCRAM users (httpauth/README.md), checked by a login here
                            "MILLRACE_HTTP_AUTH": "1",
                            "MILLRACE_HTTP_AUTH_SECURITY_PROTOCOL": "SASL_SSL",
                            "MILLRACE_HTTP_AUTH_SASL_MECHANISM": "SCRAM-SHA-512",
                            "MILLRACE_HTTP_AUTH_SSL_CA_LOCATION": str(self.secure.ca_file)})
        self._migrate(web.env)
        self.admin_login = self._ensure_admin(web.env)
        children += [web, self._collector(web.env, ports, data_dir),
                     *self._celery(web.env, data_dir)]
        # The Connect worker's group membership (connect/membership.py) speaks PLAINTEXT
        # only, so it cannot join on a secured cluster: not started under --secure.
        if self.secure is None:
            children.append(self._connect(host, ports["connect_port"], bootstrap, data_dir,
                                          None if external else brokers))
        self._run(children, host, ports, bootstrap, data_dir, external)

    def _migrate(self, env: dict[str, str]) -> None:
        """Bring the database of this data directory up to date before serving it."""
        self.stdout.write("Migrating the database ...")
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
                       cwd=settings.BASE_DIR, env={**os.environ, **env}, check=True)

    def _ensure_admin(self, env: dict[str, str]) -> str:
        """The control center's `admin` account (created on first start): its line in the
        endpoint table, with the password the one time a random one is made."""
        done = subprocess.run([sys.executable, "manage.py", "ensure_admin", "--json"],
                              cwd=settings.BASE_DIR, env={**os.environ, **env}, check=True,
                              capture_output=True, text=True)
        answer = json.loads(done.stdout.strip().splitlines()[-1])
        if "password" in answer:
            return f"user admin, password {answer['password']}  (shown only this once)"
        if answer["created"]:
            return "user admin, password from MILLRACE_ADMIN_PASSWORD"
        return "user admin  (password printed on first start)"

    def _cluster(self, brokers: int, base_port: int, data_dir: Path) -> Child:
        args = [sys.executable, "-m", "brokercluster", "--brokers", str(brokers),
                "--base-port", str(base_port), "--data-dir", str(data_dir / "cluster")]
        config = platform_cluster.broker_config(brokers)
        if self.secure is not None:
            config.update(self.secure.broker_config())
            args += ["--kafka-listener", KAFKA_LISTENER,
                     *(f"--add-scram={user}" for user in self.secure.add_scram())]
        for key, value in config.items():
            args += ["--override", f"{key}={value}"]

        def ready() -> bool:
            return "millrace cluster ready" in child.output()

        # The supervisor gives each broker 15 s to shut down cleanly, all at once.
        child = Child("cluster", args, data_dir / "logs" / "cluster.log", ready,
                      stop_timeout=40.0)
        return child

    def _web(self, host: str, ports: dict[str, int], bootstrap: str, data_dir: Path,
             workers: int) -> Child:
        binds = []
        for key in ("web_port", "registry_port", "restproxy_port"):
            binds += ["--bind", f"{host}:{ports[key]}"]
        env = {
            "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
            "MILLRACE_DATA_DIR": str(data_dir),
            "MILLRACE_WEB_PORT": str(ports["web_port"]),
            "MILLRACE_REGISTRY_PORT": str(ports["registry_port"]),
            "MILLRACE_RESTPROXY_PORT": str(ports["restproxy_port"]),
            "SCHEMA_REGISTRY_URL": f"http://{host}:{ports['registry_port']}",
            "RESTPROXY_ADVERTISED_URL": f"http://{host}:{ports['restproxy_port']}",
        }
        args = [sys.executable, "-m", "millrace.webserver", *binds,
                "--workers", str(workers), "--internal-path", f"/{settings.RESTPROXY_PREFIX}",
                "--log-level", settings.LOG_LEVEL.lower()]
        url = f"http://{host}:{ports['web_port']}/healthz"
        return Child("web", args, data_dir / "logs" / "web.log", lambda: http_ok(url), env)

    def _collector(self, env: dict[str, str], ports: dict[str, int], data_dir: Path) -> Child:
        """The platform's one collector (never one per browser): `manage.py collect`."""
        args = [sys.executable, "manage.py", "collect",
                "--metrics-port", str(ports["collector_metrics_port"])]

        def ready() -> bool:
            return "millrace collector ready" in child.output()

        child = Child("collector", args, data_dir / "logs" / "collector.log", ready,
                      {**env, "MILLRACE_CLUSTER_DIR": str(data_dir / "cluster")})
        return child

    def _celery(self, env: dict[str, str], data_dir: Path) -> list[Child]:
        """The Celery worker that runs lag analyses (threads pool: each task only waits on
        its Spark subprocess, so nothing forks after a JVM exists) and beat, which launches
        the due analysis schedules every minute."""
        celery = [sys.executable, "-m", "celery", "-A", "millrace"]
        worker = Child("celery worker", [
            *celery, "worker", "--pool", "threads", "--loglevel", "INFO",
            "--queues", settings.MILLRACE_ANALYSIS_QUEUE,
            "--concurrency", str(settings.MILLRACE_ANALYSIS_CONCURRENCY),
            "--hostname", "millrace-analytics@%h"],
            data_dir / "logs" / "celery-worker.log", lambda: " ready." in worker.output(), env)
        beat = Child("celery beat", [
            *celery, "beat", "--loglevel", "INFO",
            "--schedule", str(data_dir / "celerybeat-schedule")],
            data_dir / "logs" / "celery-beat.log",
            lambda: "beat: Starting" in beat.output(), env)
        return [worker, beat]

    def _connect(self, host: str, port: int, bootstrap: str, data_dir: Path,
                 brokers: int | None) -> Child:
        """A Kafka Connect worker in distributed mode (connect/README.md), configured with
        Kafka's keys in a properties file under the data dir; more workers join it with the
        same group.id. Its internal topics are replicated as the platform's topics are (an
        external cluster: Kafka's default of 3)."""
        replication = min(3, brokers) if brokers else 3
        folder = data_dir / "connect"
        folder.mkdir(parents=True, exist_ok=True)
        properties = folder / "worker.properties"
        properties.write_text("\n".join([
            "# Written by `manage.py platform` on each start: Kafka's connect-distributed keys.",
            f"bootstrap.servers={bootstrap}",
            "group.id=millrace-connect",
            f"listeners=http://{host}:{port}",
            "config.storage.topic=connect-configs",
            "offset.storage.topic=connect-offsets",
            "status.storage.topic=connect-status",
            *(f"{kind}.storage.replication.factor={replication}"
              for kind in ("config", "offset", "status")),
            "key.converter=org.apache.kafka.connect.json.JsonConverter",
            "value.converter=org.apache.kafka.connect.json.JsonConverter",
            # the built-in cluster has transactions; an external one may not allow them
            f"exactly.once.source.support={'disabled' if brokers is None else 'enabled'}",
            f"plugin.path={folder / 'plugins'}",
            "",
        ]))
        url = f"http://{host}:{port}/"
        return Child("connect", [sys.executable, "-m", "connect", "--config", str(properties)],
                     data_dir / "logs" / "connect.log", lambda: http_ok(url))

    def _run(self, children: list[Child], host: str, ports: dict[str, int], bootstrap: str,
             data_dir: Path, external: bool) -> None:
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        started: list[Child] = []
        try:
            for child in children:
                self.stdout.write(f"Starting {child.name} ...")
                child.start(Path(settings.BASE_DIR))
                started.append(child)
                child.wait_ready(60)
                self.stdout.write(f"{child.name} is [UP]")
            self._print_endpoints(host, ports, bootstrap, data_dir, external)
            exits: dict[str, list[float]] = {}
            while not stop.wait(0.5):
                for child in started:
                    if not child.running and not self._restart(child, exits):
                        stop.set()
        finally:
            for child in reversed(started):
                child.stop()
                self.stdout.write(f"{child.name} is [DOWN]")

    def _restart(self, child: Child, exits: dict[str, list[float]]) -> bool:
        """Start again a child that exited on its own, as systemd's Restart=on-failure would:
        a crash of one part (librdkafka can segfault in the collector's admin client while a
        group coordinator moves, controlcenter/README.md) costs that part a restart, not the
        whole platform. A child that exits RESTART_LIMIT times within RESTART_WINDOW seconds
        is broken, not unlucky: then the platform stops, printing its log."""
        now = time.monotonic()
        recent = [t for t in exits.get(child.name, []) if now - t < RESTART_WINDOW] + [now]
        exits[child.name] = recent
        code = child.proc.returncode if child.proc is not None else None
        if len(recent) >= RESTART_LIMIT:
            self.stderr.write(f"{child.name} exited (code {code}) {len(recent)} times in "
                              f"{RESTART_WINDOW:.0f} s; stopping. Its log:\n{child.tail()}")
            return False
        self.stderr.write(f"{child.name} exited (code {code}); restarting it. Its log:\n"
                          f"{child.tail()}")
        child.start(Path(settings.BASE_DIR))
        self.stdout.write(f"{child.name} restarted")
        return True

    def _print_endpoints(self, host: str, ports: dict[str, int], bootstrap: str,
                         data_dir: Path, external: bool) -> None:
        web = f"http://{host}:{ports['web_port']}"
        rows = [
            ("Kafka bootstrap", bootstrap + ("  (external)" if external else
                                             f"  ({bootstrap.count(',') + 1} brokers"
                                             f"{', SASL_SSL' if self.secure else ''})")),
            ("Control center", f"{web}/"),
            ("Schema registry", f"http://{host}:{ports['registry_port']}  "
                                f"(also {web}/{settings.REGISTRY_PREFIX})"),
            ("REST proxy", f"http://{host}:{ports['restproxy_port']}  "
                           f"(also {web}/{settings.RESTPROXY_PREFIX})"),
            ("Kafka Connect", f"http://{host}:{ports['connect_port']}  "
                              "(Kafka's Connect REST API; worker group millrace-connect)"
             if self.secure is None else "not started under --secure (its group "
                                         "membership speaks PLAINTEXT only)"),
            ("OpenAPI", f"{web}/api/docs/"),
            ("Admin login", self.admin_login),
            *self._secure_rows(),
            ("Lag metrics", f"http://127.0.0.1:{ports['collector_metrics_port']}/metrics"
                            "  (kafka-lag-exporter names)"),
            ("Lag analytics", f"{web}/analytics/  (Spark {settings.SPARK_MASTER_URL}, "
                              f"Celery on {settings.CELERY_BROKER_URL.split('://')[0]})"),
            *([] if external else _broker_rows(ports["kafka_port"], bootstrap.count(",") + 1)),
            ("Data directory", str(data_dir)),
        ]
        width = max(len(name) for name, _ in rows)
        self.stdout.write("\nMillrace is running. Endpoints:\n")
        for name, value in rows:
            self.stdout.write(f"  {name.ljust(width)}  {value}")
        self.stdout.write(
            f"\n  export KAFKA_BOOTSTRAP_SERVERS={bootstrap} "
            f"SCHEMA_REGISTRY_URL=http://{host}:{ports['registry_port']}")
        if not external:
            self._print_failover(data_dir / "cluster")
        self.stdout.write("\nPress Ctrl-C to stop.")
        self.stdout.flush()

    def _secure_rows(self) -> list[tuple[str, str]]:
        """The secured cluster's lines: the admin's librdkafka config and Kafka login."""
        if self.secure is None or self.client_config is None:
            return []
        new = self.secure.admin_password_new
        return [
            ("Client config", f"{self.client_config}  (SASL_SSL, SCRAM-SHA-512 user admin; "
                              "kcat -F, confluent-kafka)"),
            ("Kafka admin", f"user admin, password {new}  (shown only this once)" if new
             else f"user admin  (password in {self.client_config})"),
        ]

    def _print_failover(self, cluster_dir: Path) -> None:
        python, where = _short(Path(sys.executable)), _short(cluster_dir)
        commands = [
            (f"{python} -m brokercluster {action} --data-dir {where}", why)
            for action, why in (
                ("status", "pids, states, the active controller, leaders"),
                ("kill 2", "SIGKILL broker 2; it stays down"),
                ("start 2", "bring it back: it catches up and rejoins the ISR"),
                ("restart 1", "a clean stop (SIGTERM), then a start"),
            )
        ]
        width = max(len(command) for command, _ in commands)
        self.stdout.write("\nTry a failover from another terminal:")
        for command, why in commands:
            self.stdout.write(f"  {command.ljust(width)}  # {why}")


def _broker_rows(base_port: int, brokers: int) -> list[tuple[str, str]]:
    """Every port each broker opens: Kafka, the controller quorum, Prometheus metrics."""
    return [(f"Broker {node}", f"Kafka {CLUSTER_HOST}:{kafka}, controller :{controller}, "
                               f"metrics http://{CLUSTER_HOST}:{metrics}/metrics")
            for node, kafka, controller, metrics
            in platform_cluster.broker_ports(base_port, brokers)]


def _short(path: Path) -> str:
    """`path` relative to the working directory when it lies below it: easier to copy."""
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)
