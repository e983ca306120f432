"""Running persistent queries: one Celery task per running query, supervising its driver.

The task (`tasks.run_stream_query_task`, queued by name on MILLRACE_STREAMS_QUEUE) claims the
query with a conditional UPDATE (a fresh `task_token`, only if no other task's heartbeat is
fresh), then starts `python -m controlcenter.streams.driver` in its own process group and
stays with it for the query's life: it stores and pushes each progress point, renews the
heartbeat, and obeys stop and restart requests (SIGTERM: the driver stops the query between
batches). A driver that dies is started again on the same checkpoint, after a backoff;
MAX_CRASHES within CRASH_WINDOW_S make the query FAILED. A query whose SQL no longer
analyses (a topic deleted) fails at once: restarting it cannot help.

Who restarts a query whose task is gone (the worker or the whole platform stopped): the
supervisor, `resume_queries`, run by Celery beat every MILLRACE_STREAMS_SUPERVISE_S and when
a worker is ready, queues a task for every query that should run and whose heartbeat is
stale. The checkpoint makes the new driver resume where the old one stopped.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import IO, Any

from celery import current_app as app
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from controlcenter import connection
from controlcenter.analysis.runner import _die_with_parent
from controlcenter.streams import publish
from controlcenter.streams.alertfeed import AlertFeed
from controlcenter.streams.models import ACTIVE, QueryKind, StreamQuery, StreamState

log = logging.getLogger(__name__)

RUN_STREAM_TASK = "controlcenter.tasks.run_stream_query_task"
HEARTBEAT_S = 2.0
STALE_S = 15.0  # a heartbeat older than this: the task holding the query is gone
POLL_S = 0.25
GRACE_S = 20.0  # SIGTERM to SIGKILL
MAX_CRASHES, CRASH_WINDOW_S = 5, 600.0
PROGRESS_POINTS = 120  # kept on the row for the charts

# Set when the worker shuts down (tasks.py, `worker_shutting_down`): each task stops its
# driver between batches and lets go of its query, which stays in its state, so the next
# worker to be ready resumes it from its checkpoint.
SHUTTING_DOWN = threading.Event()
_HELD: set[int] = set()  # the queries this process's tasks hold
_HELD_LOCK = threading.Lock()


def queue_query(query_id: int) -> None:
    """Send the query's task to the broker the settings name now (as analyses do)."""
    url = settings.CELERY_BROKER_URL
    scheme = url.partition("://")[0]
    transport = settings.MILLRACE_FILE_QUEUE_TRANSPORT if scheme == "filesystem" else scheme
    with app.connection_for_write(
        url, transport=transport, transport_options=settings.CELERY_BROKER_TRANSPORT_OPTIONS
    ) as conn:
        app.send_task(RUN_STREAM_TASK, (query_id,), connection=conn,
                      queue=settings.MILLRACE_STREAMS_QUEUE)


def _unheld(worker: str) -> Q:
    """Queries no live task holds: a stale heartbeat, or held by an earlier life of `worker`
    (a worker killed before it could let go; this process holds only what `_HELD` says)."""
    with _HELD_LOCK:
        return _unheld_locked(worker)


def resume_queries(worker: str = "") -> list[int]:
    """Queue a task for each query that should run and that no live task holds; `worker`
    is the hostname of a worker that just got ready."""
    ids = list(StreamQuery.objects.filter(state__in=ACTIVE).filter(_unheld(worker))
               .values_list("pk", flat=True))
    for query_id in ids:
        log.info("stream query %s has no live task: queueing one", query_id)
        queue_query(query_id)
    return ids


def checkpoint_dir(name: str) -> Path:
    return Path(settings.MILLRACE_STREAMS_DIR) / name / "checkpoint"


def driver_spec(query: StreamQuery) -> dict[str, Any]:
    return {"name": query.name, "kind": query.kind, "params": query.params, "sql": query.sql,
            "topics": query.source_topics,
            "bootstrap": settings.KAFKA_BOOTSTRAP_SERVERS,
            "kafka_config": settings.KAFKA_CLIENT_CONFIG or {},
            "registry_url": settings.SCHEMA_REGISTRY_URL,
            "registry_config": registry_config(), "output_topic": query.output_topic,
            "key_column": query.key_column, "value_format": query.value_format,
            "output_mode": query.output_mode, "checkpoint": query.checkpoint,
            "master": settings.MILLRACE_STREAMS_MASTER}


def registry_config() -> dict[str, str]:
    """Confluent's registry client keys besides the URL for the streams' decoders and
    encoders: the Basic login (SCHEMA_REGISTRY_BASIC_AUTH_USER_INFO, else the platform's own
    Kafka login, as under `platform --secure`, where the registry asks HTTP Basic of the
    cluster's SCRAM users) and the CA its HTTPS port is checked against
    (MILLRACE_HTTP_TLS_CA)."""
    info = str(settings.SCHEMA_REGISTRY_BASIC_AUTH_USER_INFO)
    login = settings.KAFKA_CLIENT_CONFIG
    if not info and login.get("sasl.username"):
        info = f"{login['sasl.username']}:{login.get('sasl.password', '')}"
    return {**({"basic.auth.user.info": info} if info else {}),
            **({"ssl.ca.location": str(settings.MILLRACE_HTTP_TLS_CA)}
               if settings.MILLRACE_HTTP_TLS_CA else {})}


class Driver:
    """One driver process and the JSON lines it speaks."""

    def __init__(self, query: StreamQuery) -> None:
        folder = Path(query.checkpoint).parent
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / "driver.log", "ab") as stderr:
            # the spec on stdin, not in argv: it holds the services' Kafka and registry
            # logins, and any local user can read a process's command line
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "controlcenter.streams.driver"],
                stdout=subprocess.PIPE, stderr=stderr, stdin=subprocess.PIPE,
                env={**os.environ, "PYSPARK_PYTHON": sys.executable},
                start_new_session=True, preexec_fn=_die_with_parent)
        assert self.proc.stdin is not None
        with self.proc.stdin:
            self.proc.stdin.write(json.dumps(driver_spec(query)).encode())
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        assert self.proc.stdout is not None
        threading.Thread(target=_read_events, args=(self.proc.stdout, self.events),
                         daemon=True).start()
        self.terminating_since: float | None = None

    def terminate(self) -> None:
        if self.terminating_since is None:
            self.terminating_since = time.monotonic()
            _signal_group(self.proc.pid, signal.SIGTERM)
        elif time.monotonic() - self.terminating_since > GRACE_S:
            _signal_group(self.proc.pid, signal.SIGKILL)

    def kill(self) -> None:
        _signal_group(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)

    def drain(self) -> list[dict[str, Any]]:
        out = []
        while True:
            try:
                out.append(self.events.get_nowait())
            except queue.Empty:
                return out


def run_query(query_id: int, worker: str = "") -> str:
    """The task's body: hold the query and keep its driver running until it is stopped,
    fails for good, is deleted, or another task takes it. Returns why it ended."""
    token = uuid.uuid4().hex
    with _HELD_LOCK:
        if query_id in _HELD:
            return "held here"
        claimed = StreamQuery.objects.filter(pk=query_id, state__in=ACTIVE).filter(
            _unheld_locked(worker)).update(
            task_token=token, worker=worker, heartbeat_at=timezone.now())
        if not claimed:
            return "not claimed"
        _HELD.add(query_id)
    try:
        return _supervise(query_id, token)
    finally:
        with _HELD_LOCK:
            _HELD.discard(query_id)


def _unheld_locked(worker: str) -> Q:
    stale = timezone.now() - dt.timedelta(seconds=STALE_S)
    unheld = Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=stale)
    return unheld | (Q(worker=worker) & ~Q(pk__in=list(_HELD))) if worker else unheld


def _supervise(query_id: int, token: str) -> str:
    crashes: list[float] = []
    while True:
        outcome = _run_driver(query_id, token)
        if outcome == "restart":
            continue
        if outcome != "crashed":
            return outcome
        crashes = [t for t in crashes if time.monotonic() - t < CRASH_WINDOW_S]
        crashes.append(time.monotonic())
        if len(crashes) >= MAX_CRASHES:
            _move(query_id, token, StreamState.FAILED)
            return "failed"
        if not _move(query_id, token, StreamState.RESTARTING, restarts=_restarts(query_id) + 1):
            return "released"
        if not _wait(query_id, token, min(2.0 ** len(crashes), 30.0)):
            return "released"


def _run_driver(query_id: int, token: str) -> str:
    """Run one driver to its end: "stopped", "failed", "crashed", "restart" (asked),
    or "released" (the query is gone or another task holds it)."""
    query = StreamQuery.objects.get(pk=query_id)
    driver = Driver(query)
    StreamQuery.objects.filter(pk=query_id, task_token=token).update(driver_pid=driver.proc.pid)
    # A lag-anomaly query's alerts are read into the groups' pages by its task.
    feed = (AlertFeed(query, connection.client_config())
            if query.kind == QueryKind.LAG_ANOMALY else None)
    try:
        return _watch_driver(query, token, driver, feed)
    finally:
        if feed is not None:
            feed.close()


def _watch_driver(query: StreamQuery, token: str, driver: Driver,
                  feed: AlertFeed | None) -> str:
    query_id = query.pk
    error = ""
    started = False
    beat = 0.0
    while driver.proc.poll() is None or not driver.events.empty():
        for event in driver.drain():
            if event.get("event") == "started":
                started = True
                _move(query_id, token, StreamState.RUNNING, spark_query_id=event.get("id", ""),
                      started_at=timezone.now(), last_error="")
            elif event.get("event") == "progress":
                _progress(query_id, token, event)
            elif event.get("event") == "error":
                error = str(event.get("message") or "")
        if driver.proc.poll() is not None:
            break
        if time.monotonic() - beat > HEARTBEAT_S:
            beat = time.monotonic()
            flags = _heartbeat(query_id, token)
            if flags is None:
                driver.kill()
                _forget_if_deleted(query)
                return "released"
            if flags["stop_requested"] or flags["restart_requested"] or SHUTTING_DOWN.is_set():
                driver.terminate()
        if feed is not None and started:
            feed.poll()
        time.sleep(POLL_S)
    driver.kill()  # nothing the driver started outlives it
    StreamQuery.objects.filter(pk=query_id, task_token=token).update(driver_pid=None)
    if SHUTTING_DOWN.is_set():
        StreamQuery.objects.filter(pk=query_id, task_token=token).update(
            task_token="", heartbeat_at=None)
        return "released"
    return _ending(query_id, token, driver.proc.returncode, error, started)


def _ending(query_id: int, token: str, code: int, error: str, started: bool) -> str:
    flags = _heartbeat(query_id, token)
    if flags is None:
        return "released"
    if flags["stop_requested"]:
        _move(query_id, token, StreamState.STOPPED, stop_requested=False, task_token="",
              heartbeat_at=None)
        return "stopped"
    if flags["restart_requested"]:
        _move(query_id, token, StreamState.QUEUED, restart_requested=False, restarts=0)
        return "restart"  # started again by the loop at once
    if not started and error:  # the SQL no longer analyses: restarting cannot help
        _move(query_id, token, StreamState.FAILED, last_error=error, task_token="",
              heartbeat_at=None)
        return "failed"
    message = error or f"The query's driver exited with code {code}."
    log.warning("stream query %s crashed: %s", query_id, message)
    _move(query_id, token, StreamState.RESTARTING, last_error=message)
    return "crashed"


def _wait(query_id: int, token: str, seconds: float) -> bool:
    """Sleep the backoff, still beating; False when the query is gone or stopped."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        flags = _heartbeat(query_id, token)
        if flags is None:
            return False
        if SHUTTING_DOWN.is_set():
            StreamQuery.objects.filter(pk=query_id, task_token=token).update(
                task_token="", heartbeat_at=None)
            return False
        if flags["stop_requested"]:
            _move(query_id, token, StreamState.STOPPED, stop_requested=False, task_token="",
                  heartbeat_at=None)
            return False
        time.sleep(min(HEARTBEAT_S, max(0.0, deadline - time.monotonic())))
    return True


def _heartbeat(query_id: int, token: str) -> dict[str, bool] | None:
    if not StreamQuery.objects.filter(pk=query_id, task_token=token).update(
            heartbeat_at=timezone.now()):
        return None
    flags = StreamQuery.objects.values("stop_requested", "restart_requested").get(pk=query_id)
    return {"stop_requested": flags["stop_requested"],
            "restart_requested": flags["restart_requested"]}


def _move(query_id: int, token: str, state: StreamState, **fields: Any) -> bool:
    moved = bool(StreamQuery.objects.filter(pk=query_id, task_token=token).update(
        state=state, **fields))
    if moved:
        publish.query_changed(query_id)
    return moved


def _restarts(query_id: int) -> int:
    return int(StreamQuery.objects.values_list("restarts", flat=True).get(pk=query_id))


def _progress(query_id: int, token: str, event: dict[str, Any]) -> None:
    point = {k: v for k, v in event.items() if k != "event"}
    query = StreamQuery.objects.filter(pk=query_id, task_token=token).first()
    if query is None:
        return
    points = [*query.progress, point][-PROGRESS_POINTS:]
    StreamQuery.objects.filter(pk=query_id, task_token=token).update(progress=points)
    publish.progress(query_id, point)


def _forget_if_deleted(query: StreamQuery) -> None:
    if not StreamQuery.objects.filter(pk=query.pk).exists():
        remove_files(query.checkpoint)


def remove_files(checkpoint: str) -> None:
    shutil.rmtree(Path(checkpoint).parent, ignore_errors=True)


def _read_events(stream: IO[bytes], into: queue.Queue[dict[str, Any]]) -> None:
    for raw in stream:
        line = raw.decode("utf-8", "replace").strip()
        if line.startswith("{"):
            with contextlib.suppress(json.JSONDecodeError):
                event = json.loads(line)
                if isinstance(event, dict):
                    into.put(event)


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)
