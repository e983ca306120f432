"""The control center's client of a Kafka Connect worker's REST API (connect/, or Apache
Kafka's own workers: only Kafka's routes are used, plus the Millrace worker's
`/metrics/tasks` for throughput, which other workers simply lack).

Each cluster has its own worker (`KafkaCluster.connect_url`: MILLRACE_CONNECT_URL for the
default, MILLRACE_CONNECT_URLS or Control Center's `confluent.controlcenter.connect.<name>.
cluster` for any): calls go to the current cluster's (the switcher's), and a cluster without
one answers as a worker that does not answer, saying which setting names it.

Every call is bounded (TIMEOUT seconds). A worker that does not answer raises
`ConnectUnavailable`; an answer of 4xx/5xx raises `ConnectError` with Connect's own
`error_code` and `message`, which pages show as they are. A worker that asks HTTP Basic
(`platform --secure`) gets the control center's service credentials (`auth()`); one that
serves HTTPS (`listeners=https://...`, as under `platform --secure`) is checked against
MILLRACE_HTTP_TLS_CA, the CA the platform's own HTTP clients trust (`verify()`).
"""

from __future__ import annotations

import functools
import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
from django.conf import settings

from controlcenter import clusters

TIMEOUT = 5.0
METRICS_TIMEOUT = 1.0  # per worker: a dead worker still named by a status costs little


class ConnectUnavailable(Exception):
    """The Connect worker did not answer; `str()` says why, in httpx's words."""


class ConnectError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Throughput:
    records_total: int = 0
    records_per_second: float = 0.0


def url() -> str:
    """The current cluster's Connect worker; "" when it has none."""
    return clusters.current().connect_url.rstrip("/")


def auth() -> tuple[str, str] | None:
    """The Basic credentials for the current cluster's worker: MILLRACE_CONNECT_USER_INFO
    (the default cluster's), else the control center's own Kafka login to that cluster (a
    SCRAM user under `platform --secure`), else none. A worker without Basic auth ignores
    them."""
    cluster = clusters.current()
    info = str(settings.MILLRACE_CONNECT_USER_INFO)
    if info and cluster.name == clusters.configured()[0].name:
        user, _, password = info.partition(":")
        return user, password
    login = cluster.config  # each cluster's worker gets that cluster's login, never another's
    if login.get("sasl.username"):
        return str(login["sasl.username"]), str(login.get("sasl.password", ""))
    return None


def verify() -> ssl.SSLContext | bool:
    """httpx's `verify` for the workers' HTTPS APIs: the platform's CA
    (MILLRACE_HTTP_TLS_CA) when set, else the system's CAs."""
    return _trusting(str(settings.MILLRACE_HTTP_TLS_CA))


@functools.lru_cache(maxsize=4)
def _trusting(ca: str) -> ssl.SSLContext | bool:
    # one context per CA file: loading it costs more than the call it serves
    return ssl.create_default_context(cafile=ca) if ca else True


def _path(*parts: str) -> str:
    return "/" + "/".join(quote(p, safe="") for p in parts)


def call(method: str, path: str, body: Any = None, base: str | None = None,
         timeout: float = TIMEOUT) -> Any:
    """One REST call; the JSON answer (None for 204)."""
    if not (base or url()):
        raise ConnectUnavailable(
            f"No Kafka Connect worker is configured for cluster {clusters.current_name()} "
            "(MILLRACE_CONNECT_URLS, or confluent.controlcenter.connect.<name>.cluster in "
            "MILLRACE_CLUSTERS_FILE)")
    try:
        answer = httpx.request(method, (base or url()) + path, json=body, timeout=timeout,
                               auth=auth(), verify=verify())
    except httpx.HTTPError as exc:
        raise ConnectUnavailable(f"Kafka Connect at {base or url()} did not answer: "
                                 f"{exc or type(exc).__name__}") from exc
    if answer.status_code >= 400:
        try:
            message = str(answer.json().get("message") or answer.text)
        except ValueError:
            message = answer.text[:300]
        raise ConnectError(answer.status_code, message)
    return answer.json() if answer.content else None


def connectors() -> dict[str, Any]:
    """Every connector with its info and status (`?expand=status&expand=info`)."""
    found: dict[str, Any] = call("GET", "/connectors?expand=status&expand=info")
    return found


def connector(name: str) -> dict[str, Any]:
    return {"info": call("GET", _path("connectors", name)),
            "status": call("GET", _path("connectors", name, "status"))}


def offsets(name: str) -> list[dict[str, Any]]:
    answer = call("GET", _path("connectors", name, "offsets"))
    return list((answer or {}).get("offsets", []))


def plugins() -> list[dict[str, Any]]:
    return list(call("GET", "/connector-plugins?connectorsOnly=true"))


def validate(plugin: str, config: dict[str, str]) -> dict[str, Any]:
    found: dict[str, Any] = call("PUT", _path("connector-plugins", plugin, "config",
                                              "validate"), config)
    return found


def throughput(worker_ids: set[str]) -> dict[tuple[str, int], Throughput]:
    """Per task, from each worker that runs some (a worker that does not answer, or is not
    a Millrace worker, is left out: its tasks show no figure)."""
    found: dict[tuple[str, int], Throughput] = {}
    # a worker id is Kafka's host:port; the group's workers share the configured one's scheme
    scheme = url().partition("://")[0] or "http"
    for worker_id in sorted(worker_ids):
        base = worker_id if "://" in worker_id else f"{scheme}://{worker_id}"
        try:
            answer = call("GET", "/metrics/tasks", base=base, timeout=METRICS_TIMEOUT)
        except (ConnectUnavailable, ConnectError):
            continue
        for task in answer.get("tasks", []):
            found[(task["connector"], int(task["task"]))] = Throughput(
                int(task["records_total"]), float(task["records_per_second"]))
    return found
