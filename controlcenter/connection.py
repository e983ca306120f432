"""The control center's one ClusterClient per process, built from settings on first use."""

from __future__ import annotations

import threading

from django.conf import settings

from clusterclient import ClusterClient

# Pages must answer quickly even when the cluster does not: a short bound on every call.
TIMEOUT = 5.0

_client: ClusterClient | None = None
_lock = threading.Lock()


def cluster() -> ClusterClient:
    global _client
    with _lock:
        if _client is None or _client.bootstrap_servers != settings.KAFKA_BOOTSTRAP_SERVERS:
            _client = ClusterClient(settings.KAFKA_BOOTSTRAP_SERVERS,
                                    {"client.id": "millrace-controlcenter"}, timeout=TIMEOUT)
        return _client
