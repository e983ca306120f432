"""The Replication page: each MirrorMaker connector the Connect worker runs, with the lag
between its two clusters, and the checkpoints of each consumer group.

Everything comes from where MirrorMaker itself keeps it, so the page needs no settings of
its own beyond the Connect worker's URL: the clusters are read from the connectors' configs
(`source.cluster.bootstrap.servers`, `target.cluster.bootstrap.servers`) through Kafka's
Connect REST API; how far a flow has copied each partition from the connector's committed
source offsets (KIP-875's `GET /connectors/{name}/offsets`, as of its last offset commit)
against the source's end offsets; the checkpoints from `<source alias>.checkpoints.internal`
on the target. A worker or cluster that does not answer is said so on the page. An open
page fetches itself every REFRESH_MS and swaps its flows in, so the offsets move while it
is watched (a page view reads two clusters: no Celery collector is needed for it).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any

import httpx
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from clusterclient import ClusterClient, ClusterRequestError, ClusterUnavailable, TopicPartition
from clusterclient.records import RecordReader
from connect.connectors.mirror.clusters import client_settings
from connect.connectors.mirror.formats import Checkpoint, FormatError
from controlcenter import connectapi

TIMEOUT = 3.0  # a page waits this long for the worker and each cluster, no longer
MIRROR = "org.apache.kafka.connect.mirror."
CHECKPOINTS_READ = 2000  # the newest checkpoint records read per page view
REFRESH_MS = 5000  # the open page fetches itself again this often (js/replication.js)


@dataclass
class PartitionLag:
    topic: str
    remote_topic: str
    partition: int
    source_end: int | None
    replicated: int | None  # the next source offset to copy, as of the last offset commit
    target_end: int | None

    @property
    def lag(self) -> int | None:
        if self.source_end is None:
            return None
        return max(0, self.source_end - (self.replicated or 0))


@dataclass
class Flow:
    name: str
    kind: str  # MirrorSourceConnector, MirrorCheckpointConnector, MirrorHeartbeatConnector
    state: str
    source_alias: str
    target_alias: str
    source: str
    target: str
    tasks: list[dict[str, Any]] = field(default_factory=list)
    remote_prefix: str = ""  # "" under IdentityReplicationPolicy
    source_settings: dict[str, str] = field(default_factory=dict)  # its clients' settings
    target_settings: dict[str, str] = field(default_factory=dict)
    partitions: list[PartitionLag] = field(default_factory=list)
    checkpoints: list[Checkpoint] = field(default_factory=list)
    error: str | None = None

    @property
    def total_lag(self) -> int:
        return sum(p.lag or 0 for p in self.partitions)


def connect_url() -> str:
    # The viewed cluster's worker (the Connect page's, connectapi.url(): flows into a
    # cluster run on its worker, as Kafka places MirrorMaker on the target's Connect
    # cluster), else the worker the platform starts on MILLRACE_CONNECT_PORT
    return connectapi.url() or f"http://127.0.0.1:{settings.CONNECT_PORT}"


@require_GET
def replication(request: HttpRequest) -> HttpResponse:
    url = connect_url()
    flows: list[Flow] = []
    error = None
    try:
        flows = _flows(url)
    except (httpx.HTTPError, ValueError) as exc:
        error = f"The Connect worker at {url} did not answer: {exc}"
    for flow in flows:
        if flow.state == "FAILED":
            continue  # its trace is on the Connect page; its clusters may not answer
        try:
            if flow.kind == "MirrorSourceConnector":
                flow.partitions = _lags(url, flow)
            elif flow.kind == "MirrorCheckpointConnector":
                flow.checkpoints = _checkpoints(flow)
        except (ClusterUnavailable, ClusterRequestError, httpx.HTTPError) as exc:
            flow.error = str(exc)
    return render(request, "controlcenter/replication.html",
                  {"flows": flows, "error": error, "connect_url": url,
                   "refresh_ms": REFRESH_MS})


def _flows(url: str) -> list[Flow]:
    answer = httpx.get(f"{url}/connectors", params=[("expand", "info"), ("expand", "status")],
                       timeout=TIMEOUT, auth=connectapi.auth(), verify=connectapi.verify())
    answer.raise_for_status()
    flows = []
    for name, found in sorted(answer.json().items()):
        config = found["info"]["config"]
        kind = config.get("connector.class", "").removeprefix(MIRROR)
        if not kind.startswith("Mirror"):
            continue
        kind = kind if kind.endswith("Connector") else kind + "Connector"
        status = found.get("status", {})
        alias = config.get("source.cluster.alias", "")
        identity = config.get("replication.policy.class", "").endswith("IdentityReplicationPolicy")
        flows.append(Flow(
            name, kind, status.get("connector", {}).get("state", "UNASSIGNED"), alias,
            config.get("target.cluster.alias", "target"),
            config.get("source.cluster.bootstrap.servers", ""),
            config.get("target.cluster.bootstrap.servers", ""), status.get("tasks", []),
            "" if identity else alias + config.get("replication.policy.separator", "."),
            client_settings(config, "source"), client_settings(config, "target")))
    return flows


_clients: dict[str, ClusterClient] = {}
_lock = threading.Lock()


def _client(config: dict[str, str]) -> ClusterClient:
    """One client per cluster per process, as connection.cluster() keeps its own."""
    key = repr(sorted(config.items()))
    with _lock:
        if key not in _clients:
            _clients[key] = ClusterClient(
                config.get("bootstrap.servers", ""),
                {**config, "client.id": "millrace-controlcenter-replication"}, timeout=TIMEOUT)
        return _clients[key]


def _forget_after_fork() -> None:
    global _lock
    _clients.clear()  # librdkafka's threads do not survive fork()
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


def _lags(url: str, flow: Flow) -> list[PartitionLag]:
    answer = httpx.get(f"{url}/connectors/{flow.name}/offsets", timeout=TIMEOUT,
                       auth=connectapi.auth(), verify=connectapi.verify())
    answer.raise_for_status()
    committed = {(o["partition"]["topic"], int(o["partition"]["partition"])):
                 int(o["offset"]["offset"]) + 1
                 for o in answer.json().get("offsets", []) if o.get("offset")}
    partitions = sorted({tp for task in _assigned(url, flow.name) for tp in task} |
                        set(committed))
    source_ends = _client(flow.source_settings).end_offsets(
        [TopicPartition(t, p) for t, p in partitions])
    remote = {t: flow.remote_prefix + t for t, _ in partitions}
    target_ends = _client(flow.target_settings).end_offsets(
        [TopicPartition(remote[t], p) for t, p in partitions])
    return [PartitionLag(t, remote[t], p, source_ends.offset(TopicPartition(t, p)),
                         committed.get((t, p)), target_ends.offset(TopicPartition(remote[t], p)))
            for t, p in partitions]


def _assigned(url: str, name: str) -> list[list[tuple[str, int]]]:
    """Each task's partitions, from its config (`task.assigned.partitions`)."""
    answer = httpx.get(f"{url}/connectors/{name}/tasks", timeout=TIMEOUT,
                       auth=connectapi.auth(), verify=connectapi.verify())
    answer.raise_for_status()
    tasks = []
    for task in answer.json():
        listed = task.get("config", {}).get("task.assigned.partitions", "")
        tasks.append([(t, int(p)) for t, p in (a.rsplit("-", 1) for a in listed.split(",") if a)])
    return tasks


def _checkpoints(flow: Flow) -> list[Checkpoint]:
    """The newest checkpoint of each group and partition."""
    topic = f"{flow.source_alias}.checkpoints.internal"
    with RecordReader(flow.target, flow.target_settings, timeout=TIMEOUT) as reader:
        try:
            ranges = reader.latest(topic, CHECKPOINTS_READ)
        except ClusterRequestError:
            return []  # no checkpoint written yet
        records = reader.read(topic, ranges, max_records=CHECKPOINTS_READ)
    newest: dict[tuple[str, str, int], Checkpoint] = {}
    for record in records:
        try:
            checkpoint = Checkpoint.decode(record.key, record.value)
        except FormatError:
            continue
        newest[(checkpoint.group, checkpoint.topic, checkpoint.partition)] = checkpoint
    return [newest[k] for k in sorted(newest)]
