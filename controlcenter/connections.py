"""The control center's handles on the cluster it watches, built from settings once per process.

`cluster()` is the one `ClusterClient` of this process (thread-safe, shared); `supervisor()`
is the built-in cluster's supervisor client, or None when the platform watches an external
cluster (nothing answers at MILLRACE_CLUSTER_DIR); `record_reader()` opens a bounded reader
for one message-browsing request. Pages that render cluster state use none of these: they
read the collector's tables. Actions, message browsing and on-demand config reads do.
"""

from __future__ import annotations

import functools

from django.conf import settings

from brokercluster.client import SupervisorClient
from clusterclient import ClusterClient
from clusterclient.records import RecordReader

# Short: a page waiting on a dead cluster must answer with a banner, not hang.
REQUEST_TIMEOUT_S = 5.0


def cluster() -> ClusterClient:
    return _cluster(settings.KAFKA_BOOTSTRAP_SERVERS)


@functools.cache
def _cluster(bootstrap_servers: str) -> ClusterClient:
    return ClusterClient(bootstrap_servers, {"client.id": "millrace-controlcenter"},
                         timeout=REQUEST_TIMEOUT_S)


def supervisor() -> SupervisorClient | None:
    """The built-in cluster's supervisor when one serves MILLRACE_CLUSTER_DIR, else None."""
    client = SupervisorClient(settings.MILLRACE_CLUSTER_DIR, timeout=60.0)
    return client if client.socket_path.exists() else None


def record_reader() -> RecordReader:
    return RecordReader(settings.KAFKA_BOOTSTRAP_SERVERS,
                        {"client.id": "millrace-message-browser"}, timeout=REQUEST_TIMEOUT_S)


def bootstrap_servers() -> str:
    return str(settings.KAFKA_BOOTSTRAP_SERVERS)
