"""The distributed herder: one thread that owns the worker's group membership, its view of
the config topic, and the connectors and tasks running here (Kafka's DistributedHerder).

Everything that changes that state runs on the herder thread: REST requests arrive as jobs
(`call()`), config-topic records as events from the reader thread; between jobs the thread
heartbeats. With `connect.protocol=compatible` (the default here) rebalances are incremental
and cooperative: a worker keeps running what it keeps, stops only what is revoked, and joins
again at once when something was. With `eager` (Connect protocol `default`) every connector
and task stops before each join.
"""

from __future__ import annotations

import logging
import queue
import ssl
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from typing import Any, TypeVar

import httpx
from confluent_kafka.admin import AdminClient

from connect import protocol
from connect.api import Connector, ConnectorContext, SourceConnector
from connect.assignor import IncrementalAssignor, assign_eager
from connect.config import WorkerConfig
from connect.membership import ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, GroupMember, Security
from connect.plugins import Plugins
from connect.rest_auth import worker_credentials
from connect.storage import ConfigState, ConfigStore, OffsetStore, Status, StatusStore
from connect.worker import SinkTaskRunner, SourceTaskRunner, TaskRunner, TaskSetup
from connect.worker import setup_converters as converters_for

log = logging.getLogger(__name__)
T = TypeVar("T")
TaskId = tuple[str, int]


class Herder:
    def __init__(self, config: WorkerConfig, plugins: Plugins,
                 peer_verify: ssl.SSLContext | bool = True) -> None:
        self.config = config
        self.plugins = plugins
        # what its requests to other workers' REST APIs trust (rest_tls.peer_verify)
        self.peer_verify = peer_verify
        self.worker_id = config.worker_id
        settings = config.client_settings()
        self.settings = settings
        self.configs = ConfigStore(settings, config.config_topic, self._on_config_record)
        self.offsets = OffsetStore(settings, config.offset_topic)
        self.statuses = StatusStore(settings, config.status_topic)
        self.member = GroupMember(
            config.bootstrap_servers, config.group_id, client_id=f"connect-{self.worker_id}",
            session_timeout_ms=config.session_timeout_ms,
            rebalance_timeout_ms=config.rebalance_timeout_ms,
            security=Security.from_client_settings(settings))
        self.jobs: queue.Queue[Callable[[], None]] = queue.Queue()
        self.generation = -1
        self.leader_url: str | None = None
        self.is_leader = False
        self.rejoin = True
        self.rejoin_at: float | None = None
        self.protocol: str | None = None
        self.assignment: protocol.Assignment | None = None
        self.assignor = IncrementalAssignor(config.scheduled_rebalance_max_delay_ms)
        self.snapshot = ConfigState()
        self.connectors: dict[str, Connector] = {}
        self.tasks: dict[TaskId, TaskRunner] = {}
        self.kafka_cluster_id = ""
        # Its own requests to the leader log in as the worker when the REST API asks for
        # Basic auth (rest_auth.worker_credentials)
        credentials = (worker_credentials(config)
                       if config.props.get("rest.extension.classes") else None)
        self.internal_headers = {"authorization": credentials.header()} if credentials else {}
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="herder", daemon=True)

    # --- life ------------------------------------------------------------------------
    def start(self) -> None:
        c = self.config
        self.configs.log.ensure_topic(1, c.config_replication)
        self.offsets.log.ensure_topic(c.offset_partitions, c.offset_replication)
        self.statuses.log.ensure_topic(c.status_partitions, c.status_replication)
        self.offsets.log.start()
        self.statuses.log.start()
        self.configs.log.start()
        self.kafka_cluster_id = AdminClient(self.settings).list_topics(timeout=30).cluster_id
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.jobs.put(lambda: None)
        self.thread.join(60)
        for log_ in (self.configs.log, self.offsets.log, self.statuses.log):
            log_.stop()

    def call(self, fn: Callable[[], T]) -> Future[T]:
        """Run `fn` on the herder thread; its result or exception in the future."""
        future: Future[T] = Future()

        def job() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 - handed whole to the caller, who renders it
                future.set_exception(exc)
        self.jobs.put(job)
        return future

    def _run(self) -> None:
        interval = self.config.heartbeat_interval_ms / 1000
        next_beat = 0.0
        while not self.stopping.is_set():
            try:
                if self.rejoin_at is not None and time.monotonic() >= self.rejoin_at:
                    self.rejoin, self.rejoin_at = True, None
                if self.rejoin:
                    self._rebalance()
                    next_beat = time.monotonic() + interval
                self._run_jobs(next_beat)
                if time.monotonic() >= next_beat:
                    next_beat = time.monotonic() + interval
                    self._heartbeat()
            except Exception:  # the herder loop must outlive any one failure; it rejoins
                log.exception("herder: unexpected error; rejoining the group")
                self.rejoin = True
                time.sleep(1)
        self._stop_all()
        self.member.leave()

    def _heartbeat(self) -> None:
        error = self.member.heartbeat()
        if error in (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION):
            # out of the group: what this worker ran may already run elsewhere
            log.warning("worker %s fell out of its group (error %d): stopping everything",
                        self.worker_id, error)
            self._stop_all()
            self.assignment = None
        if error != 0:
            self.rejoin = True

    def _run_jobs(self, until: float) -> None:
        while not self.rejoin and not self.stopping.is_set():
            left = until - time.monotonic()
            if left <= 0:
                return
            try:
                job = self.jobs.get(timeout=left)
            except queue.Empty:
                return
            job()

    # --- the group -------------------------------------------------------------------
    def _protocols(self) -> list[tuple[str, bytes]]:
        url, offset = self.config.advertised_url, self.configs.snapshot().offset
        eager = (protocol.EAGER, protocol.encode_metadata(protocol.WorkerState(url, offset)))
        if self.config.connect_protocol == "eager":
            return [eager]
        state = protocol.WorkerState(url, offset, self.assignment)
        return [(protocol.COOPERATIVE, protocol.encode_metadata(state, 1)), eager]

    def _rebalance(self) -> None:
        if self.config.connect_protocol == "eager" or self.protocol == protocol.EAGER:
            self._stop_all()
            self.assignment = None
        self.leader_url, self.is_leader = None, False
        self.configs.log.read_to_end()
        joined = self.member.join(self._protocols(), self._assign)
        assignment = protocol.decode_assignment(joined.assignment)
        self.generation, self.protocol = joined.generation, joined.protocol
        self.rejoin = False
        if assignment.failed():
            log.info("group %s: the leader's config is ahead of ours; reading and rejoining",
                     self.config.group_id)
            self.configs.log.read_to_end()
            self.rejoin = True
            return
        if self.configs.snapshot().offset < assignment.config_offset:
            self.configs.log.read_to_end()
        self.is_leader = joined.leader_id == joined.member_id
        self.leader_url = assignment.leader_url
        self.snapshot = self.configs.snapshot()
        previous, self.assignment = self.assignment, assignment
        log.info("worker %s joined generation %d (%s, leader %s): connectors %s, tasks %s, "
                 "revoked %s %s, delay %d ms", self.worker_id, self.generation, self.protocol,
                 self.leader_url, assignment.connectors, assignment.tasks,
                 assignment.revoked_connectors, assignment.revoked_tasks, assignment.delay_ms)
        self._apply_assignment(previous, assignment)

    def _apply_assignment(self, previous: protocol.Assignment | None,
                          assignment: protocol.Assignment) -> None:
        """Stop what was revoked (or is no longer ours), start what is new; with revocations
        join again at once, with a delay when it has passed."""
        had = set(previous.connectors) if previous else set()
        for name in had - set(assignment.connectors):
            self._stop_connector(name)
        for task in set(self.tasks) - set(assignment.tasks):
            self.tasks.pop(task).stop()
        for name in assignment.connectors:
            if name not in had:
                self._start_connector(name)
        for task in assignment.tasks:
            if task not in self.tasks:
                self._start_task(*task)
        if assignment.revoked_connectors or assignment.revoked_tasks:
            self.rejoin = True
        if assignment.delay_ms > 0:
            self.rejoin_at = time.monotonic() + assignment.delay_ms / 1000

    def _assign(self, chosen: str, members: dict[str, bytes]) -> dict[str, bytes]:
        states = {m: protocol.decode_metadata(data) for m, data in members.items()}
        self.configs.log.read_to_end()
        snap = self.configs.snapshot()
        newest = max(s.config_offset for s in states.values())
        url, version = self.config.advertised_url, protocol.VERSIONS.get(chosen, 0)
        if snap.offset < newest:
            failed = protocol.Assignment(protocol.CONFIG_MISMATCH, self.member.member_id, url,
                                         snap.offset)
            return {m: protocol.encode_assignment(failed, version) for m in states}
        if chosen == protocol.COOPERATIVE:
            plans = self.assignor.assign(states, list(snap.connectors), snap.all_tasks(),
                                         time.monotonic() * 1000)
        else:
            plans = assign_eager(states, list(snap.connectors), snap.all_tasks())
        return {m: protocol.encode_assignment(protocol.Assignment(
            protocol.NO_ERROR, self.member.member_id, url, snap.offset,
            tuple(sorted(p.connectors)), tuple(sorted(p.tasks)),
            tuple(sorted(p.revoked_connectors)), tuple(sorted(p.revoked_tasks)), p.delay_ms),
            version) for m, p in plans.items()}

    def _stop_all(self) -> None:
        for runner in self.tasks.values():
            runner.stopping.set()
        for runner in self.tasks.values():
            runner.stop()
        self.tasks.clear()
        for name in list(self.connectors):
            self._stop_connector(name)

    # --- config events ---------------------------------------------------------------
    def _on_config_record(self, kind: str, name: str, data: Any) -> None:
        """From the config topic's reader thread: handled on the herder thread."""
        if kind == "restart" and data is not None:
            self.jobs.put(lambda: self.restart_local(
                name, bool(data.get("include-tasks")), bool(data.get("only-failed"))))
        elif kind == "config":
            self.jobs.put(lambda: self._config_changed(name))

    def _config_changed(self, name: str) -> None:
        new, old = self.configs.snapshot(), self.snapshot
        counts = {n: len(t) for n, t in new.tasks.items()}
        structural = (set(new.connectors) != set(old.connectors)
                      or counts != {n: len(t) for n, t in old.tasks.items()})
        if self.protocol != protocol.COOPERATIVE and (structural or new.tasks != old.tasks):
            self.rejoin = True  # eager: the next assignment restarts everything
            return
        self.snapshot = new
        self._drop_deleted()
        self._restart_reconfigured_tasks(old)
        if self.assignment is not None and name in self.assignment.connectors:
            if new.connectors.get(name) != old.connectors.get(name):
                self._stop_connector(name)
                self._start_connector(name)
            elif new.target_states.get(name) != old.target_states.get(name):
                self._apply_target(name)
        self._apply_target_to_tasks(name)
        if structural:
            self.rejoin = True  # the leader hands out what is new, and revokes what is gone

    def _drop_deleted(self) -> None:
        """Stop at once what belongs to deleted connectors, and forget it."""
        if self.assignment is None:
            return
        alive = self.snapshot.connectors
        for name in [n for n in self.assignment.connectors if n not in alive]:
            self._stop_connector(name)
        for task in [t for t in self.tasks if t[0] not in alive]:
            self.tasks.pop(task).stop()
        self.assignment = replace(
            self.assignment, connectors=tuple(n for n in self.assignment.connectors
                                              if n in alive),
            tasks=tuple(t for t in self.assignment.tasks if t[0] in alive))

    def _restart_reconfigured_tasks(self, old: ConfigState) -> None:
        """Tasks kept here whose config changed restart with it; assigned tasks whose config
        has just arrived start."""
        if self.assignment is None:
            return
        for task in self.assignment.tasks:
            now = self.snapshot.tasks.get(task[0], [])
            before = old.tasks.get(task[0], [])
            if task[1] >= len(now):
                continue
            if task not in self.tasks:
                self._start_task(*task)
            elif task[1] >= len(before) or before[task[1]] != now[task[1]]:
                self.restart_task(task)

    def _apply_target(self, name: str) -> None:
        target = self.snapshot.target_states.get(name, "STARTED")
        if target == "STOPPED":
            self._stop_connector(name)
            self.report_connector(name, "STOPPED", None)
        elif name not in self.connectors:
            self._start_connector(name)
        else:
            self.report_connector(name, "PAUSED" if target == "PAUSED" else "RUNNING", None)

    def _apply_target_to_tasks(self, name: str) -> None:
        paused = self.snapshot.target_states.get(name, "STARTED") == "PAUSED"
        for (connector, _), runner in self.tasks.items():
            if connector == name:
                runner.pause(paused)

    # --- connectors ------------------------------------------------------------------
    def _start_connector(self, name: str) -> None:
        config = self.snapshot.connectors.get(name)
        if config is None:
            return
        target = self.snapshot.target_states.get(name, "STARTED")
        if target == "STOPPED":
            self.report_connector(name, "STOPPED", None)
            return
        try:
            connector = self.plugins.find(config.get("connector.class", ""))()
            connector.initialize(ConnectorContext(
                lambda: self.jobs.put(lambda: self._reconfigure(name)),
                lambda exc: self.jobs.put(lambda: self._connector_failed(name, exc))))
            connector.start(config)
            task_configs = connector.task_configs(int(config.get("tasks.max", "1")))
        except Exception:  # noqa: BLE001 - a plugin's own code: FAILED with its trace
            self.report_connector(name, "FAILED", traceback.format_exc())
            return
        self.connectors[name] = connector
        self.report_connector(name, "PAUSED" if target == "PAUSED" else "RUNNING", None)
        if task_configs != self.snapshot.tasks.get(name):
            self._publish_tasks(name, task_configs)

    def _reconfigure(self, name: str) -> None:
        """The connector asked for new task configs (its work changed)."""
        connector, config = self.connectors.get(name), self.snapshot.connectors.get(name)
        if connector is None or config is None:
            return
        try:
            task_configs = connector.task_configs(int(config.get("tasks.max", "1")))
        except Exception:  # noqa: BLE001 - a plugin's own code: FAILED with its trace
            self._connector_failed(name, None)
            return
        if task_configs != self.snapshot.tasks.get(name):
            self._publish_tasks(name, task_configs)

    def _connector_failed(self, name: str, exc: BaseException | None) -> None:
        if name not in self.connectors:
            return
        trace = traceback.format_exc() if exc is None else "".join(
            traceback.format_exception(exc))
        self._stop_connector(name)
        self.report_connector(name, "FAILED", trace)

    def _stop_connector(self, name: str) -> None:
        connector = self.connectors.pop(name, None)
        if connector is None:
            return
        try:
            connector.stop()
        except Exception:  # a connector failing to stop must not stop the herder
            log.exception("connector %s failed to stop", name)

    def _publish_tasks(self, name: str, configs: list[dict[str, str]]) -> None:
        if self.is_leader:
            self.put_task_configs(name, configs)
            return
        try:
            httpx.post(f"{self.leader_url}/connectors/{name}/tasks", json=configs,
                       headers=self.internal_headers, timeout=30,
                       verify=self.peer_verify).raise_for_status()
        except httpx.HTTPError as exc:
            log.warning("connector %s: task configs not accepted by the leader (%s); "
                        "trying again", name, exc)
            threading.Timer(1.0, lambda: self.jobs.put(
                lambda: self._publish_tasks(name, configs))).start()

    def put_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        """The leader writes a connector's task configs and their commit record."""
        self.configs.put_tasks(name, configs)
        self.configs.log.read_to_end()

    # --- tasks -----------------------------------------------------------------------
    def _start_task(self, name: str, index: int) -> None:
        tasks = self.snapshot.tasks.get(name, [])
        config = self.snapshot.connectors.get(name)
        if config is None or index >= len(tasks):
            return
        try:
            runner = self._runner(name, index, config, tasks[index])
        except Exception:  # noqa: BLE001 - a plugin's class or converter: FAILED with its trace
            self.report_task((name, index), "FAILED", traceback.format_exc())
            return
        runner.paused = self.snapshot.target_states.get(name) == "PAUSED"
        self.tasks[(name, index)] = runner
        runner.start()

    def _runner(self, name: str, index: int, config: dict[str, str],
                task_config: dict[str, str]) -> TaskRunner:
        cls = self.plugins.find(config.get("connector.class", ""))
        key, value = converters_for({**cls.default_converters, **config}, self.config.props)
        setup = TaskSetup(
            connector=name, task_id=index, config=task_config, connector_config=config,
            task_class=cls().task_class(), key_converter=key, value_converter=value,
            client_settings=self.settings,
            report=lambda state, trace: self.report_task((name, index), state, trace),
            group_id=self.config.group_id,
            flush_interval_s=self.config.offset_flush_interval_ms / 1000,
            exactly_once=self.config.exactly_once_source)
        if issubclass(cls, SourceConnector):
            return SourceTaskRunner(setup, self.offsets,
                                    lambda topic: self.statuses.put_topic(name, topic))
        return SinkTaskRunner(setup)

    def restart_local(self, name: str, include_tasks: bool, only_failed: bool) -> None:
        """Restart what this worker runs of `name` (a restart request reached it)."""
        if self.assignment is None:
            return
        status = self.statuses.connectors.get(name)
        if name in self.assignment.connectors and (
                not only_failed or (status is not None and status.state == "FAILED")):
            self.report_connector(name, "RESTARTING", None)
            self._stop_connector(name)
            self._start_connector(name)
        if include_tasks:
            for task in self.assignment.tasks:
                if task[0] == name and (not only_failed or self._task_failed(task)):
                    self.restart_task(task)

    def _task_failed(self, task: TaskId) -> bool:
        status = self.statuses.tasks.get(task)
        return status is not None and status.state == "FAILED"

    def restart_task(self, task: TaskId) -> None:
        runner = self.tasks.pop(task, None)
        if runner is not None:
            runner.stop()
        self.report_task(task, "RESTARTING", None)
        self._start_task(*task)

    def owns_task(self, task: TaskId) -> bool:
        return self.assignment is not None and task in self.assignment.tasks

    # --- statuses --------------------------------------------------------------------
    def report_connector(self, name: str, state: str, trace: str | None) -> None:
        self.statuses.put(f"status-connector-{name}",
                          Status(state, trace, self.worker_id, self.generation))

    def report_task(self, task: TaskId, state: str, trace: str | None) -> None:
        key = f"status-task-{task[0]}-{task[1]}"
        if state == "UNASSIGNED" and task[0] not in self.configs.snapshot().connectors:
            self.statuses.log.producer.produce(self.statuses.log.topic, key=key.encode(),
                                               value=None)
            return
        self.statuses.put(key, Status(state, trace, self.worker_id, self.generation))
