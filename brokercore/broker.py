"""One broker: configuration, controller, replica manager, coordinators and listener."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable

import brokercore.handlers  # noqa: F401  (registers every API handler)
from brokercore.clock import Clock, SystemClock
from brokercore.config import BrokerConfig, Listener
from brokercore.controller.controller import Controller, ControllerError
from brokercore.controller.image import MetadataImage
from brokercore.coordinator import broker_group_coordinator
from brokercore.handlers.fetch_sessions import FetchSessionCache
from brokercore.handlers.parts import BrokerParts
from brokercore.metrics import MetricsServer, start_metrics_server
from brokercore.protocol.errors import ErrorCode
from brokercore.replication.log_dirs import LogDir, open_log_dirs
from brokercore.replication.replica_manager import ReplicaManager
from brokercore.security.authorizer import Authorizer
from brokercore.security.connection import ListenerSecurity
from brokercore.security.listeners import (
    ListenerSpec,
    advertised_listeners,
    client_listener_specs,
    inter_broker_listener_name,
)
from brokercore.security.scram import MECHANISM_IDS, ScramCredential
from brokercore.server import KafkaServer
from brokercore.shutdown import STEP_SECONDS, bounded
from brokercore.txn import broker_transaction_coordinator, broker_transaction_verifier

log = logging.getLogger(__name__)


class Broker:
    def __init__(self, config: BrokerConfig, clock: Clock | None = None) -> None:
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self.node_id = config.node_id
        self.log_dirs = open_log_dirs(config.log_dirs, self.node_id)
        # The metadata log stays in `metadata.log.dir`, by default the first log dir.
        self.log_dir = config.metadata_log_dir
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.controller = Controller(config, self.log_dir / "__cluster_metadata-0")
        self.replica_manager = ReplicaManager(
            config, self.controller.image, self.log_dirs, self.clock
        )
        self.controller.listeners.append(self.replica_manager.on_metadata)
        self.controller.snapshot_listeners.append(self.replica_manager.on_metadata_snapshot)
        self.replica_manager.isr.alter_partition = self.controller.alter_partition  # ISR changes
        self.replica_manager.on_dir_offline = self._on_dir_offline
        self.controller.quorum.on_storage_failure = self._on_metadata_dir_failed
        self.group_coordinator = broker_group_coordinator(
            config, self.replica_manager, self.controller, self.clock)
        self.transaction_coordinator = broker_transaction_coordinator(
            config, self.replica_manager, self.controller, self.clock)
        self.transaction_verifier = broker_transaction_verifier(
            config, self.transaction_coordinator, self.controller)
        self.metrics: MetricsServer | None = None  # brokercore.metrics, when configured
        self.listener_specs = client_listener_specs(config)
        self.inter_broker_listener = inter_broker_listener_name(config)
        sessions = FetchSessionCache(
            config.get_int("max.incremental.fetch.session.cache.slots"), self.clock)
        self.parts = BrokerParts(self.node_id, config, self.replica_manager,
                                 self.controller, self.group_coordinator,
                                 self.transaction_coordinator, self.transaction_verifier,
                                 sessions, Authorizer(config, self.controller.image.acls))
        self.servers = {spec.name: KafkaServer(
            self.parts, spec.host, spec.port,
            ListenerSecurity.build(config, spec, self._scram_credential))
            for spec in self.listener_specs}
        first = self.listener_specs[0]
        self.server = self.servers[first.name]  # the first client listener
        self.advertised = Listener(first.name, first.host, first.port)
        self.endpoints: dict[str, Listener] = {}
        self.incarnation = str(uuid.uuid4())  # tells this process start from earlier ones
        self.broker_epoch = -1
        self._heartbeats: asyncio.Task[None] | None = None
        self._heartbeat_now = asyncio.Event()
        # Set when every log dir, or the metadata log's dir, has failed: the broker must stop
        # (`python -m brokercore` then exits 1), as Kafka's does.
        self.failed = asyncio.Event()
        # Log dir failures so far, and how many of them a heartbeat has told the controller
        # of (KIP-858's `log.dir.failure.timeout.ms`).
        self._dir_failures = 0
        self._acknowledged_failures = 0
        self._acknowledged = asyncio.Condition()
        self._failure_watches: set[asyncio.Task[None]] = set()

    @property
    def image(self) -> MetadataImage:
        return self.controller.image

    @property
    def cluster_id(self) -> str | None:
        return self.controller.image.cluster_id

    async def start(self) -> None:
        """Join the metadata quorum, catch up, serve Kafka, then register."""
        await self.controller.start()
        await self.replica_manager.load()
        for spec in self.listener_specs:
            port = await self.servers[spec.name].start()
            self.endpoints[spec.name] = self._advertised_listener(spec, port)
        self.advertised = self.endpoints[self.listener_specs[0].name]
        await self._first_registration()
        if self.replica_manager.offline_replicas():  # a dir is still failed: say so at once
            self._heartbeat_now.set()
        self._heartbeats = asyncio.create_task(self._heartbeat_loop())
        self.replica_manager.start()
        self.group_coordinator.start()
        self.transaction_coordinator.start()
        self.metrics = await start_metrics_server(
            self.config, self.replica_manager, self.controller, self.parts.fetch_sessions)
        for spec in self.listener_specs:
            log.info("node %d: serving Kafka on %s://%s:%d (%s)", self.node_id, spec.name,
                     spec.host or "*", self.servers[spec.name].port, spec.protocol.value)

    def _scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        """A user's SCRAM credential, read from the live metadata image at each login."""
        found = self.image.scram_credentials.get(user, {}).get(MECHANISM_IDS[mechanism])
        if found is None:
            return None
        return ScramCredential(found.salt, found.stored_key, found.server_key, found.iterations)

    async def _first_registration(self) -> None:
        """Register, retrying while the quorum has no answer (its leader is being elected,
        or busy: a restarted broker on a loaded machine met a 2 s request timeout and
        exited), until initial.broker.registration.timeout.ms, as Kafka's broker does."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.get_int(
            "initial.broker.registration.timeout.ms") / 1000
        while True:
            try:
                await self._register()
                return
            except ControllerError as exc:
                retriable = exc.error_code in (ErrorCode.REQUEST_TIMED_OUT,
                                               ErrorCode.NOT_CONTROLLER)
                if not retriable or loop.time() >= deadline:
                    raise
                log.info("node %d: registration not answered yet, retrying: %s",
                         self.node_id, exc.message)
            await asyncio.sleep(0.2)

    async def _register(self) -> None:
        inter_broker = self.endpoints[self.inter_broker_listener]
        self.broker_epoch = await self.controller.register_broker(
            self.node_id, inter_broker.host, inter_broker.port,
            self.config.get("broker.rack"), self.incarnation,
            [(e.name, e.host, e.port) for e in self.endpoints.values()],
        )

    async def _heartbeat_loop(self) -> None:
        """Keep this broker's session with the active controller (KRaft's BrokerHeartbeat).

        A fenced broker's next heartbeat unfences it; an answer that the controller does not
        know this registration (a new active controller's log lost it, or an old epoch)
        makes it register again."""
        interval = self.config.get_int("broker.heartbeat.interval.ms") / 1000
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._heartbeat_now.wait(), interval)
            self._heartbeat_now.clear()
            reported = self._dir_failures
            try:
                await self.controller.heartbeat(
                    self.node_id, self.broker_epoch,
                    offline_replicas=self.replica_manager.offline_replicas())
                if reported > self._acknowledged_failures:
                    async with self._acknowledged:
                        self._acknowledged_failures = reported
                        self._acknowledged.notify_all()
            except ControllerError as exc:
                log.info("node %d: heartbeat failed: %s", self.node_id, exc.message)
                if exc.error_code in (ErrorCode.STALE_BROKER_EPOCH,
                                      ErrorCode.BROKER_ID_NOT_REGISTERED):
                    with contextlib.suppress(ControllerError):
                        await self._register()

    def _on_dir_offline(self, log_dir: LogDir) -> None:
        """A log dir failed while running: tell the controller at once (KIP-858), or stop
        when no dir is left."""
        if not any(d.online for d in self.log_dirs):
            log.critical("node %d: every log dir has failed; shutting down", self.node_id)
            self.failed.set()
        self._dir_failures += 1
        self._heartbeat_now.set()
        watch = asyncio.create_task(self._expect_acknowledgement(log_dir, self._dir_failures))
        self._failure_watches.add(watch)
        watch.add_done_callback(self._failure_watches.discard)

    async def _expect_acknowledgement(self, log_dir: LogDir, failure: int) -> None:
        """KIP-858: a broker that cannot get the controller to take a failed dir's replicas
        (a heartbeat naming them, answered) within `log.dir.failure.timeout.ms` stops: its
        leaderships there would otherwise stay with it, unserved."""
        timeout = self.config.get_int("log.dir.failure.timeout.ms") / 1000
        try:
            async with self._acknowledged:
                await asyncio.wait_for(self._acknowledged.wait_for(
                    lambda: self._acknowledged_failures >= failure), timeout)
        except TimeoutError:
            log.critical("node %d: the controller has not acknowledged the failure of log dir "
                         "%s within log.dir.failure.timeout.ms (%d ms); shutting down",
                         self.node_id, log_dir.path, timeout * 1000)
            self.failed.set()

    def _on_metadata_dir_failed(self, error: OSError) -> None:
        """Kafka's rule: without its metadata log the broker cannot follow the cluster, so it
        stops (whichever dir holds it, and whatever the other dirs' state)."""
        log.critical("node %d: the metadata log dir %s has failed (%s); shutting down",
                     self.node_id, self.log_dir, error)
        self.failed.set()

    async def _controlled_shutdown(self) -> None:
        """Move this broker's leaderships away before it stops (`want_shutdown`).

        Skipped when no other broker is live: there is nowhere to move them to. Given up
        once no active controller has answered for two election timeouts (it is gone, or
        there is none, and this node no longer stands to become one) and at the latest
        after two controller request timeouts."""
        others = [b for b in self.image.brokers.values()
                  if b.node_id != self.node_id and not b.fenced]
        if not others or not self.config.get_bool("controlled.shutdown.enable"):
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 2 * self.controller.quorum.request_timeout
        patience = 2 * self.config.get_int("controller.quorum.election.timeout.ms") / 1000
        answered = loop.time()
        while (give_up := min(deadline, answered + patience)) > loop.time():
            try:
                async with asyncio.timeout(give_up - loop.time()):
                    result = await self.controller.heartbeat(
                        self.node_id, self.broker_epoch, want_shutdown=True)
                answered = loop.time()
                if result.shutdown_ready:
                    log.info("node %d: controlled shutdown complete", self.node_id)
                    return
            except (ControllerError, TimeoutError) as exc:
                log.info("node %d: controlled shutdown: %s", self.node_id,
                         getattr(exc, "message", "no answer in time"))
            await asyncio.sleep(0.1)
        log.warning("node %d: controlled shutdown did not complete; stopping anyway",
                    self.node_id)

    def _advertised_listener(self, bound: ListenerSpec, bound_port: int) -> Listener:
        """The listener as clients are told of it: `advertised.listeners`' entry of the
        same name, else where it is bound (a wildcard host advertised as localhost)."""
        advertised = advertised_listeners(self.config).get(bound.name)
        if advertised is not None:
            port = bound_port if advertised.port == 0 else advertised.port
            return Listener(advertised.name, advertised.host, port)
        host = bound.host if bound.host not in ("", "0.0.0.0", "::") else "localhost"
        return Listener(bound.name, host, bound_port)

    async def stop(self) -> None:
        """A clean stop, each step bounded (`shutdown`): stop standing for election first,
        so that a node left without a quorum does not keep itself (or others) waiting."""
        log.info("node %d: shutting down", self.node_id)
        self.controller.quorum.retire()
        budget = 2 * self.controller.quorum.request_timeout + STEP_SECONDS
        for watch in list(self._failure_watches):
            watch.cancel()
        if self._heartbeats is not None:
            self._heartbeats.cancel()
            await bounded(self.node_id, "controlled shutdown", self._controlled_shutdown(),
                          budget)
        steps: list[tuple[str, Callable[[], Awaitable[None]] | None]] = [
            ("metrics", self.metrics.stop if self.metrics is not None else None),
            ("Kafka listeners", self._stop_servers),
            ("group coordinator", self.group_coordinator.stop),
            ("transaction verifier", self.transaction_verifier.stop),
            ("transaction coordinator", self.transaction_coordinator.stop),
            ("replica manager", self.replica_manager.stop),
            ("controller", self.controller.stop),
        ]
        for what, step in steps:
            if step is not None:
                await bounded(self.node_id, what, step(), STEP_SECONDS)
        log.info("node %d: stopped", self.node_id)

    async def _stop_servers(self) -> None:
        """Every listener at once: each drains its connections (`KafkaServer.stop`)."""
        await asyncio.gather(*(server.stop() for server in self.servers.values()))
