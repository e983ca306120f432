"""`python manage.py platform`: the built-in cluster and the web server, as one command.

Starts the built-in cluster, `python -m brokercluster` with 3 brokers (unless
KAFKA_BOOTSTRAP_SERVERS or --external points at an external cluster), then the web server
(`millrace.webserver`: uvicorn in MILLRACE_WEB_WORKERS processes) serving the control
center, the schema registry and the REST proxy, the collector, Celery, and a Kafka Connect
worker (`python -m connect`), and waits for them to be ready: the clusters first (the
database is migrated while their brokers start, then the web server starts), then
whatever reads the clusters, all at once. It
prints the endpoints and the commands to try a failover, restarts a child that exits on its
own (three exits in a minute stop the platform), and on Ctrl-C stops everything in
reverse order: the clusters' clients together, then the web server, then the clusters.

With --clusters N (N >= 2) it also starts N-1 more built-in clusters, each a
`python -m brokercluster` of --cluster-brokers brokers (default 1) with its own data dir
(`<data dir>/cluster-<name>`) and ports (base port + 1000 per cluster), named
`<MILLRACE_CLUSTER_NAME>-2` and so on, given to every service in MILLRACE_CLUSTERS, with a
collector and a Kafka Connect worker of their own (its REST port the Connect port + 1000 per
cluster, given to the control center in MILLRACE_CONNECT_URLS). Without the flag nothing
changes.

With --secure (or MILLRACE_SECURE=1) the built-in cluster is secured (millrace/secure.py,
README "A secured platform"): SASL_SSL only, the authorizer on, the platform's services
logged in as a super user, an `admin` SCRAM user whose password is printed once, and the
control center requiring login. With --clusters N every built-in cluster is secured alike,
from the same CA and credentials, and each gets its own client configs: the services' told
to every service in MILLRACE_CLUSTER_CLIENT_CONFIGS, the admin's printed as `Client config
(<name>)`.
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
from clusterclient.clusters import KafkaCluster
from connect.rest_auth import BASIC_AUTH_EXTENSION
from millrace import platform_cluster
from millrace.management.children import Child, http_ok
from millrace.secure import (
    KAFKA_LISTENER,
    PLAIN_MODULE,
    SERVICE_PRINCIPALS,
    SERVICE_USER,
    SecureFiles,
)

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
        parser.add_argument("--clusters", type=int, default=1,
                            help="built-in clusters to run (more than 1: the others next to "
                                 "the first, for replication between clusters)")
        parser.add_argument("--cluster-brokers", type=int, default=1,
                            help="brokers in each built-in cluster after the first")
        parser.add_argument("--secure", action="store_true", default=settings.MILLRACE_SECURE,
                            help="SASL_SSL, ACLs and logins on the built-in cluster "
                                 "(MILLRACE_SECURE=1)")

    def handle(self, *args: Any, **opts: Any) -> None:
        host: str = opts["host"]
        self.host = host
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
        # each other built-in cluster's admin client config (--secure --clusters N)
        self.client_configs: dict[str, Path] = {}
        if opts["secure"]:
            if external:
                raise CommandError("--secure secures the built-in cluster; an external "
                                   "cluster's clients are configured with "
                                   "MILLRACE_KAFKA_CLIENT_CONFIG")
            self.secure = SecureFiles.ensure(data_dir)
        self.extra = self._extra_clusters(opts, ports["kafka_port"], data_dir)
        # each built-in cluster after the first: its Connect worker's REST port
        self.connect_ports = {c.name: free_port(host) if opts["any_port"]
                              else ports["connect_port"] + 1000 * number
                              for number, (c, _) in enumerate(self.extra, 1)}
        # Every cluster the services will know (their from_settings(settings)), the default
        # first: what the platform's own code (the Connect worker's replication) uses.
        self.clusters: tuple[KafkaCluster, ...] = (
            KafkaCluster(settings.MILLRACE_CLUSTER_NAME, bootstrap,
                         supervisor_dir=None if external else str(data_dir / "cluster")),
            *(c for c, _ in self.extra), *settings.KAFKA_EXTRA_CLUSTERS)
        children = [] if external else [self._cluster(brokers, ports["kafka_port"], data_dir)]
        children += [self._cluster(opts["cluster_brokers"], base, Path(c.supervisor_dir or ""),
                                   c.name) for c, base in self.extra]
        web = self._web(host, ports, bootstrap, data_dir, opts["workers"])
        if self.extra:  # every service knows them: settings.KAFKA_EXTRA_CLUSTERS
            web.env["MILLRACE_CLUSTERS"] = " ".join(
                [f"{c.name}={c.bootstrap_servers}" for c, _ in self.extra]
                + [os.environ.get("MILLRACE_CLUSTERS", "")]).strip()
            # and their Connect workers (settings.KAFKA_CONNECT_URLS)
            web.env["MILLRACE_CONNECT_URLS"] = " ".join(
                [f"{name}={self.connect_scheme}://{host}:{port}"
                 for name, port in self.connect_ports.items()]
                + [os.environ.get("MILLRACE_CONNECT_URLS", "")]).strip()
        if self.secure is not None:
            service, self.client_config = self.secure.write_client_configs(bootstrap)
            # every other built-in cluster's login, as the default's below: the control
            # center, its collector and the REST proxy reach each cluster with its own
            services = {}
            for cluster, _ in self.extra:
                services[cluster.name], self.client_configs[cluster.name] = \
                    self.secure.write_client_configs(cluster.bootstrap_servers, cluster.name)
            if services:
                web.env["MILLRACE_CLUSTER_CLIENT_CONFIGS"] = " ".join(
                    [f"{name}={path}" for name, path in services.items()]
                    + [os.environ.get("MILLRACE_CLUSTER_CLIENT_CONFIGS", "")]).strip()
            web.env.update({"MILLRACE_KAFKA_CLIENT_CONFIG": str(service),
                            "MILLRACE_UI_LOGIN_REQUIRED": "1", "MILLRACE_SECURE": "1",
                            # the registry and the proxy ask HTTP Basic of the cluster's
                            # SCRAM users (httpauth/README.md), checked by a login here
                            "MILLRACE_HTTP_AUTH": "1",
                            "MILLRACE_HTTP_AUTH_SECURITY_PROTOCOL": "SASL_SSL",
                            "MILLRACE_HTTP_AUTH_SASL_MECHANISM": "SCRAM-SHA-512",
                            "MILLRACE_HTTP_AUTH_SSL_CA_LOCATION": str(self.secure.ca_file),
                            # the Security pages keep their hands off these
                            "MILLRACE_SERVICE_PRINCIPALS": ",".join(SERVICE_PRINCIPALS)})
        # The clusters' clients: they start once the clusters are ready (the Celery workers
        # too: on ready they resume stream queries, which read the clusters).
        on_clusters = [self._collector(web.env, ports, data_dir),
                       *(self._collector(web.env, ports, data_dir, c.name)
                         for c, _ in self.extra),
                       *self._celery(web.env, data_dir),
                       self._connect(host, ports["connect_port"], bootstrap, data_dir,
                                     None if external else brokers),
                       *(self._connect(host, self.connect_ports[c.name], c.bootstrap_servers,
                                       data_dir, opts["cluster_brokers"], c.name)
                         for c, _ in self.extra)]
        self._run([children, [web], on_clusters], web.env, host, ports, bootstrap, data_dir,
                  external)

    def _migrate_and_ensure_admin(self, env: dict[str, str]) -> str:
        """Bring the database of this data directory up to date before serving it, and make
        the control center's `admin` account (on first start), in one Django process: its
        line in the endpoint table, with the password the one time a random one is made."""
        self.stdout.write("Migrating the database ...")
        done = subprocess.run([sys.executable, "manage.py", "ensure_admin", "--migrate",
                               "--json"],
                              cwd=settings.BASE_DIR, env={**os.environ, **env}, check=True,
                              stdout=subprocess.PIPE, text=True)
        answer = json.loads(done.stdout.strip().splitlines()[-1])
        if "password" in answer:
            return f"user admin, password {answer['password']}  (shown only this once)"
        if answer["created"]:
            return "user admin, password from MILLRACE_ADMIN_PASSWORD"
        return "user admin  (password printed on first start)"

    def _extra_clusters(self, opts: dict[str, Any], kafka_port: int,
                        data_dir: Path) -> list[tuple[KafkaCluster, int]]:
        """The built-in clusters after the first (--clusters), with their base ports: each
        1000 ports above the one before (or free ones with --any-port)."""
        count, brokers = opts["clusters"], opts["cluster_brokers"]
        if count > 1 and (opts["external"] or "KAFKA_BOOTSTRAP_SERVERS" in os.environ):
            raise CommandError("--clusters runs more built-in clusters next to the built-in "
                               "one; add external clusters with MILLRACE_CLUSTERS")
        if count < 1 or brokers < 1:
            raise CommandError("--clusters and --cluster-brokers must be at least 1")
        extra = []
        for number in range(2, count + 1):
            name = f"{settings.MILLRACE_CLUSTER_NAME}-{number}"
            base = (free_base_port(brokers, CLUSTER_HOST) if opts["any_port"]
                    else kafka_port + 1000 * (number - 1))
            bootstrap = ",".join(f"{CLUSTER_HOST}:{base + i}" for i in range(brokers))
            extra.append((KafkaCluster(name, bootstrap,
                                       supervisor_dir=str(data_dir / f"cluster-{name}")), base))
        return extra

    def _cluster(self, brokers: int, base_port: int, data_dir: Path,
                 name: str | None = None) -> Child:
        """The built-in cluster (`name` None, in <data dir>/cluster) or another one (its
        data dir given)."""
        folder = data_dir / "cluster" if name is None else data_dir
        args = [sys.executable, "-m", "brokercluster", "--brokers", str(brokers),
                "--base-port", str(base_port), "--data-dir", str(folder)]
        config = platform_cluster.broker_config(brokers)
        # --secure: every built-in cluster alike (millrace/secure.py: one CA, one set of
        # credentials), its first start creating the admin's and the services' SCRAM users
        if self.secure is not None:
            config.update(self.secure.broker_config())
            args += ["--kafka-listener", KAFKA_LISTENER,
                     *(f"--add-scram={user}" for user in self.secure.add_scram())]
        for key, value in config.items():
            args += ["--override", f"{key}={value}"]

        secure = self.secure
        bootstrap = ",".join(f"{CLUSTER_HOST}:{base_port + i}" for i in range(brokers))

        def ready() -> bool:
            # secured: ready once the services' SCRAM login is there too (a cluster made
            # before the platform added it gets it now)
            return "millrace cluster ready" in child.output() and (
                secure is None or secure.ensure_service_scram(bootstrap))

        # The supervisor gives each broker 15 s to shut down cleanly, all at once.
        log = (data_dir / "logs" / "cluster.log" if name is None
               else data_dir.parent / "logs" / f"cluster-{name}.log")
        child = Child("cluster" if name is None else f"cluster {name}", args, log, ready,
                      stop_timeout=40.0)
        return child

    def _web(self, host: str, ports: dict[str, int], bootstrap: str, data_dir: Path,
             workers: int) -> Child:
        binds = ["--bind", f"{host}:{ports['web_port']}"]
        cert, key = self._http_tls()
        api_bind = "--tls-bind" if cert else "--bind"
        for name in ("registry_port", "restproxy_port"):
            binds += [api_bind, f"{host}:{ports[name]}"]
        if cert:
            binds += ["--tls-cert", cert, *(["--tls-key", key] if key else [])]
        scheme = self.api_scheme
        env = {
            "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
            "MILLRACE_DATA_DIR": str(data_dir),
            "MILLRACE_WEB_PORT": str(ports["web_port"]),
            "MILLRACE_REGISTRY_PORT": str(ports["registry_port"]),
            "MILLRACE_RESTPROXY_PORT": str(ports["restproxy_port"]),
            "MILLRACE_CONNECT_PORT": str(ports["connect_port"]),  # the replication page asks it
            "SCHEMA_REGISTRY_URL": f"{scheme}://{host}:{ports['registry_port']}",
            "RESTPROXY_ADVERTISED_URL": f"{scheme}://{host}:{ports['restproxy_port']}",
            # the control center's Connect page (controlcenter/pages/connect.py)
            "MILLRACE_CONNECT_URL": f"{self.connect_scheme}://{host}:{ports['connect_port']}",
        }
        if self.secure is not None:
            env.update({"MILLRACE_HTTP_TLS_CERT": cert,
                        "MILLRACE_HTTP_TLS_CA": str(self.secure.ca_file)})
        args = [sys.executable, "-m", "millrace.webserver", *binds,
                "--workers", str(workers), "--internal-path", f"/{settings.RESTPROXY_PREFIX}",
                "--log-level", settings.LOG_LEVEL.lower()]
        url = f"http://{host}:{ports['web_port']}/healthz"
        return Child("web", args, data_dir / "logs" / "web.log", lambda: http_ok(url), env)

    def _http_tls(self) -> tuple[str, str]:
        """(certificate, key) of the registry's and the proxy's HTTPS ports: the secured
        platform's own (its CA signed it), else MILLRACE_HTTP_TLS_CERT/_KEY; ("", "") for
        plain HTTP."""
        if self.secure is not None:
            return str(self.secure.http_keystore), ""
        return settings.MILLRACE_HTTP_TLS_CERT, settings.MILLRACE_HTTP_TLS_KEY

    @property
    def api_scheme(self) -> str:
        return "https" if self._http_tls()[0] else "http"

    @property
    def connect_scheme(self) -> str:
        """The built-in cluster's Connect worker serves HTTPS under --secure."""
        return "https" if self.secure is not None else "http"

    def _collector(self, env: dict[str, str], ports: dict[str, int], data_dir: Path,
                   cluster: str | None = None) -> Child:
        """The platform's one collector per cluster (never one per browser): `manage.py
        collect`, with `--cluster` for a cluster after the first (no lag metrics port: the
        default's serves every cluster's, collector/metrics.py)."""
        args = [sys.executable, "manage.py", "collect", "--metrics-port",
                str(ports["collector_metrics_port"] if cluster is None else 0)]
        if cluster is not None:
            args += ["--cluster", cluster]

        def ready() -> bool:
            return "millrace collector ready" in child.output()

        child = Child("collector" if cluster is None else f"collector {cluster}", args,
                      data_dir / "logs" / (f"collector-{cluster}.log" if cluster
                                           else "collector.log"), ready,
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
        # Stream queries' tasks last as long as their queries: a worker of their own, so
        # they never take the analyses' threads (controlcenter/README.md, "Streams").
        streams = Child("celery streams worker", [
            *celery, "worker", "--pool", "threads", "--loglevel", "INFO",
            "--queues", settings.MILLRACE_STREAMS_QUEUE,
            "--concurrency", str(settings.MILLRACE_STREAMS_CONCURRENCY),
            "--hostname", "millrace-streams@%h"],
            data_dir / "logs" / "celery-streams.log", lambda: " ready." in streams.output(), env)
        beat = Child("celery beat", [
            *celery, "beat", "--loglevel", "INFO",
            "--schedule", str(data_dir / "celerybeat-schedule")],
            data_dir / "logs" / "celery-beat.log",
            lambda: "beat: Starting" in beat.output(), env)
        return [worker, streams, beat]

    def _connect_security(self) -> list[str]:
        """The worker's login to the secured cluster, in Kafka's connect-distributed keys:
        the platform's service user over SASL_SSL/PLAIN, trusting the platform's CA. Its
        group membership and its clients both use them (connect/README.md)."""
        if self.secure is None:
            return []
        return ["security.protocol=SASL_SSL", "sasl.mechanism=PLAIN",
                f'sasl.jaas.config={PLAIN_MODULE} required username="{SERVICE_USER}" '
                f'password="{self.secure.passwords[SERVICE_USER]}";',
                # the CA: the brokers' and, forwarding to the leader, the other workers'
                "ssl.truststore.type=PEM", f"ssl.truststore.location={self.secure.ca_file}",
                # its REST API serves HTTPS with the registry's and the proxy's certificate
                # (`listeners=https://...`, above), in Kafka's prefixed keys, so the
                # worker's Kafka clients never take it for theirs
                "listeners.https.ssl.keystore.type=PEM",
                f"listeners.https.ssl.keystore.location={self.secure.http_keystore}",
                # and asks HTTP Basic of the cluster's SCRAM users (Kafka's key)
                f"rest.extension.classes={BASIC_AUTH_EXTENSION}",
                f"rest.basic.auth.realm={settings.MILLRACE_HTTP_AUTH_REALM}"]

    def _connect(self, host: str, port: int, bootstrap: str, data_dir: Path,
                 brokers: int | None, cluster: str | None = None) -> Child:
        """A Kafka Connect worker in distributed mode (connect/README.md), configured with
        Kafka's keys in a properties file under the data dir; more workers join it with the
        same group.id. Its internal topics are replicated as the platform's topics are (an
        external cluster: Kafka's default of 3). `cluster`: another built-in cluster's
        worker (`<data dir>/connect-<name>`, its own internal topics on its own cluster;
        the plugins are the default worker's, one folder for the user's connectors)."""
        replication = min(3, brokers) if brokers else 3
        scheme = self.connect_scheme  # every cluster's worker alike (--secure: https)
        folder = data_dir / ("connect" if cluster is None else f"connect-{cluster}")
        folder.mkdir(parents=True, exist_ok=True)
        properties = folder / "worker.properties"
        properties.write_text("\n".join([
            "# Written by `manage.py platform` on each start: Kafka's connect-distributed keys.",
            f"bootstrap.servers={bootstrap}",
            "group.id=millrace-connect",
            f"listeners={scheme}://{host}:{port}",
            "config.storage.topic=connect-configs",
            "offset.storage.topic=connect-offsets",
            "status.storage.topic=connect-status",
            *(f"{kind}.storage.replication.factor={replication}"
              for kind in ("config", "offset", "status")),
            "key.converter=org.apache.kafka.connect.json.JsonConverter",
            "value.converter=org.apache.kafka.connect.json.JsonConverter",
            # the built-in cluster has transactions; an external one may not allow them
            f"exactly.once.source.support={'disabled' if brokers is None else 'enabled'}",
            f"plugin.path={data_dir / 'connect' / 'plugins'}",
            *self._connect_security(),
            "",
        ]))
        properties.chmod(0o600)  # under --secure it holds the services' password
        url = f"{scheme}://{host}:{port}/"
        login = (SERVICE_USER, self.secure.passwords[SERVICE_USER]) if self.secure else None
        ca = str(self.secure.ca_file) if self.secure else None
        return Child("connect" if cluster is None else f"connect {cluster}",
                     [sys.executable, "-m", "connect", "--config", str(properties)],
                     data_dir / "logs" / ("connect.log" if cluster is None
                                          else f"connect-{cluster}.log"),
                     lambda: http_ok(url, login, ca))

    def _run(self, stages: list[list[Child]], env: dict[str, str], host: str,
             ports: dict[str, int], bootstrap: str, data_dir: Path, external: bool) -> None:
        """Start the children stage by stage, each stage's all at once, and wait until every
        one is ready: the clusters (the database is migrated while their brokers start),
        then the web server (the database ready), then once the clusters are ready whatever
        reads them. Ctrl-C stops them stage by stage in reverse, each stage's all at once."""
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        started: list[list[Child]] = []
        clusters, web, on_clusters = stages
        try:
            self._start(clusters, started)
            self.admin_login = self._migrate_and_ensure_admin(env)
            self._start(web, started)
            self._wait_ready(clusters)
            self._start(on_clusters, started)
            self._wait_ready([*web, *on_clusters])
            self._print_endpoints(host, ports, bootstrap, data_dir, external)
            exits: dict[str, list[float]] = {}
            while not stop.wait(0.5):
                for child in (child for stage in started for child in stage):
                    if not child.running and not self._restart(child, exits):
                        stop.set()
        finally:
            for stage in reversed(started):
                for child in stage:
                    child.terminate()
                for child in reversed(stage):
                    child.wait_stopped()
                    self.stdout.write(f"{child.name} is [DOWN]")

    def _start(self, stage: list[Child], started: list[list[Child]]) -> None:
        """Start every child of `stage` without waiting for any to be ready."""
        started.append([])
        for child in stage:
            self.stdout.write(f"Starting {child.name} ...")
            child.start(Path(settings.BASE_DIR))
            started[-1].append(child)

    def _wait_ready(self, children: list[Child]) -> None:
        """Wait until every child is ready, printing each as it gets there. They started
        together and share the machine, so the time allowed is what waiting for each in
        turn allowed: 60 s for each child not yet ready, counted again from the last one
        that got ready."""
        pending = list(children)
        deadline = time.monotonic() + 60 * len(pending)
        while pending:
            for child in list(pending):
                child.check_running()
                if child.ready():
                    pending.remove(child)
                    deadline = time.monotonic() + 60 * len(pending)
                    self.stdout.write(f"{child.name} is [UP]")
            if pending and time.monotonic() > deadline:
                raise TimeoutError(f"{', '.join(c.name for c in pending)} not ready after "
                                   f"{60 * len(pending)}s; see {pending[0].log_path}")
            time.sleep(0.1)

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
            ("Schema registry", f"{self.api_scheme}://{host}:{ports['registry_port']}  "
                                f"(also {web}/{settings.REGISTRY_PREFIX})"),
            ("REST proxy", f"{self.api_scheme}://{host}:{ports['restproxy_port']}  "
                           f"(also {web}/{settings.RESTPROXY_PREFIX})"),
            ("Kafka Connect", f"{self.connect_scheme}://{host}:{ports['connect_port']}  "
                              "(Kafka's Connect REST API; worker group millrace-connect"
                              f"{', SASL_SSL to the cluster; HTTP Basic' if self.secure else ''})"),
            ("OpenAPI", f"{web}/api/docs/"),
            ("Admin login", self.admin_login),
            *self._secure_rows(),
            ("Lag metrics", f"http://127.0.0.1:{ports['collector_metrics_port']}/metrics"
                            "  (kafka-lag-exporter names"
                            f"{'; every cluster, label cluster_name' if self.extra else ''}"
                            f"{'; an API token or Basic' if self.secure else ''})"),
            ("Lag analytics", f"{web}/analytics/  (Spark {settings.SPARK_MASTER_URL}, "
                              f"Celery on {settings.CELERY_BROKER_URL.split('://')[0]})"),
            *([] if external else [(f"Broker {node}", value) for node, value in _broker_rows(
                ports["kafka_port"], bootstrap.count(",") + 1)]),
            *self._extra_rows(),
            ("Data directory", str(data_dir)),
        ]
        width = max(len(name) for name, _ in rows)
        self.stdout.write("\nMillrace is running. Endpoints:\n")
        for name, value in rows:
            self.stdout.write(f"  {name.ljust(width)}  {value}")
        self.stdout.write(
            f"\n  export KAFKA_BOOTSTRAP_SERVERS={bootstrap} "
            f"SCHEMA_REGISTRY_URL={self.api_scheme}://{host}:{ports['registry_port']}")
        if not external:
            self._print_failover(data_dir / "cluster")
        self.stdout.write("\nPress Ctrl-C to stop.")
        self.stdout.flush()

    def _extra_rows(self) -> list[tuple[str, str]]:
        """Each built-in cluster after the first: its bootstrap, then its brokers' ports."""
        rows = []
        for cluster, base in self.extra:
            count = cluster.bootstrap_servers.count(",") + 1
            rows.append((f"Kafka bootstrap ({cluster.name})",
                         f"{cluster.bootstrap_servers}  ({count} broker{'s' * (count > 1)}, "
                         f"{'SASL_SSL, ' if self.secure else ''}"
                         f"data in {_short(Path(cluster.supervisor_dir or ''))})"))
            if cluster.name in self.client_configs:
                rows.append((f"Client config ({cluster.name})",
                             f"{self.client_configs[cluster.name]}  (SASL_SSL, SCRAM-SHA-512 "
                             "user admin, the same password)"))
            rows.append((f"Kafka Connect ({cluster.name})",
                         f"{self.connect_scheme}://{self.host}:"
                         f"{self.connect_ports[cluster.name]}  "
                         "(worker group millrace-connect on that cluster"
                         f"{'; HTTP Basic' if self.secure else ''})"))
            rows += [(f"{cluster.name} broker {node}", value)
                     for node, value in _broker_rows(base, count)]
        return rows

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
    return [(str(node), f"Kafka {CLUSTER_HOST}:{kafka}, controller :{controller}, "
                        f"metrics http://{CLUSTER_HOST}:{metrics}/metrics")
            for node, kafka, controller, metrics
            in platform_cluster.broker_ports(base_port, brokers)]


def _short(path: Path) -> str:
    """`path` relative to the working directory when it lies below it: easier to copy."""
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)
