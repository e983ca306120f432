"""The control center's one ClusterClient per process, built from settings on first use."""

from __future__ import annotations

import os
import threading

from django.conf import settings

from brokercluster.client import SupervisorClient
from clusterclient import ClusterClient
from clusterclient.records import RecordFollower, RecordReader

# Pages must answer quickly even when the cluster does not: a short bound on every call.
TIMEOUT = 5.0

_client: ClusterClient | None = None
_lock = threading.Lock()


def cluster() -> ClusterClient:
    global _client
    with _lock:
        if _client is None or _client.bootstrap_servers != settings.KAFKA_BOOTSTRAP_SERVERS:
            _client = ClusterClient(settings.KAFKA_BOOTSTRAP_SERVERS,
                                    {**client_config(), "client.id": "millrace-controlcenter"},
                                    timeout=TIMEOUT)
        return _client


def _forget_after_fork() -> None:
    """librdkafka's threads do not survive fork(): a forked server process (Daphne workers,
    test servers) must build its own client rather than inherit a dead one."""
    global _client, _lock
    _client, _lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


# --- For the cluster pages: the supervisor, message reads --------------------------------


def supervisor() -> SupervisorClient | None:
    """The built-in cluster's supervisor when its control socket exists at
    MILLRACE_CLUSTER_DIR; None for an external cluster."""
    client = SupervisorClient(settings.MILLRACE_CLUSTER_DIR, timeout=60.0)
    return client if client.socket_path.exists() else None


def record_reader() -> RecordReader:
    """A bounded reader for one message-browsing request (close it, or use `with`)."""
    return RecordReader(settings.KAFKA_BOOTSTRAP_SERVERS,
                        {**client_config(), "client.id": "millrace-message-browser"},
                        timeout=TIMEOUT)


def record_follower() -> RecordFollower:
    """A reader that stays on a topic, for one live tail (controlcenter/livetail.py)."""
    return RecordFollower(settings.KAFKA_BOOTSTRAP_SERVERS,
                          {**client_config(), "client.id": "millrace-live-tail",
                           "fetch.max.bytes": str(4 << 20),
                           "queued.max.messages.kbytes": str(8 << 10)}, timeout=TIMEOUT)


def client_config() -> dict[str, str]:
    """The librdkafka keys every client of the control center adds: a secured cluster's
    login (settings.KAFKA_CLIENT_CONFIG), or nothing."""
    return dict(settings.KAFKA_CLIENT_CONFIG)


def bootstrap_servers() -> str:
    return str(settings.KAFKA_BOOTSTRAP_SERVERS)
