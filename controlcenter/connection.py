"""The control center's ClusterClient per cluster and process, built from settings on first
use; every function here acts on the current cluster (clusters.current(): the switcher's)."""

from __future__ import annotations

import os
import threading

from brokercluster.client import SupervisorClient
from clusterclient import ClusterClient
from clusterclient.records import RecordFollower, RecordReader
from controlcenter import clusters

# Pages must answer quickly even when the cluster does not: a short bound on every call.
TIMEOUT = 5.0

_clients: dict[str, ClusterClient] = {}  # by cluster name
_lock = threading.Lock()


def cluster() -> ClusterClient:
    current = clusters.current()
    with _lock:
        found = _clients.get(current.name)
        if found is None or found.bootstrap_servers != current.bootstrap_servers:
            found = _clients[current.name] = ClusterClient(
                current.bootstrap_servers,
                {**client_config(), "client.id": "millrace-controlcenter"}, timeout=TIMEOUT)
        return found


def _forget_after_fork() -> None:
    """librdkafka's threads do not survive fork(): a forked server process (Daphne workers,
    test servers) must build its own client rather than inherit a dead one."""
    global _clients, _lock
    _clients, _lock = {}, threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


# --- For the cluster pages: the supervisor, message reads --------------------------------


def supervisor() -> SupervisorClient | None:
    """The built-in cluster's supervisor when its control socket exists in its data dir
    (MILLRACE_CLUSTER_DIR, `cluster-<name>` for another); None for an external cluster."""
    folder = clusters.current().supervisor_dir
    if folder is None:
        return None
    client = SupervisorClient(folder, timeout=60.0)
    return client if client.socket_path.exists() else None


def record_reader() -> RecordReader:
    """A bounded reader for one message-browsing request (close it, or use `with`)."""
    return RecordReader(bootstrap_servers(),
                        {**client_config(), "client.id": "millrace-message-browser"},
                        timeout=TIMEOUT)


def record_follower() -> RecordFollower:
    """A reader that stays on a topic, for one live tail (controlcenter/livetail.py)."""
    return RecordFollower(bootstrap_servers(),
                          {**client_config(), "client.id": "millrace-live-tail",
                           "fetch.max.bytes": str(4 << 20),
                           "queued.max.messages.kbytes": str(8 << 10)}, timeout=TIMEOUT)


def client_config() -> dict[str, str]:
    """The librdkafka keys every client of the control center adds: a secured cluster's
    login (settings.KAFKA_CLIENT_CONFIG, or another cluster's config), or nothing."""
    return dict(clusters.current().config)


def bootstrap_servers() -> str:
    return clusters.current().bootstrap_servers
