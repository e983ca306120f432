"""Which cluster the control center is looking at: the switcher's choice, one per session.

Every configured cluster (clusterclient.clusters.from_settings) has the same pages. The read
model's rows carry their cluster's name (`cluster` column), and the read model's managers
(`ClusterScoped`) see only the current cluster's rows, so the pages, the JSON API and the
collector's store need no cluster argument:

- a request: `ClusterMiddleware` takes the session's choice (the switcher posts it; any page
  also takes `?cluster=<name>`, so a link can name a cluster) for the whole request;
- the collector: `manage.py collect --cluster NAME` is one process per cluster, which
  `activate_process` pins to its cluster for every thread.

The session rather than a URL prefix: every page, form, websocket and API path stays as it
was (bookmarks and links of a one-cluster platform keep working), and a user who switches
stays on the chosen cluster from page to page, as in Control Center.

The lag analyses (runs, schedules) and the audit log are not read model: their rows carry
the cluster they belong to, and their lists show the current cluster's rows unless asked for
every cluster's (`?cluster=all`, `listed`). A run or schedule never moves to another cluster
silently: a name no configured cluster has is refused (`checked`, `UnknownCluster`).
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.db import models
from django.http import HttpRequest, HttpResponseBase

from clusterclient.clusters import KafkaCluster, by_name, from_settings

SESSION_KEY = "millrace_cluster"
ALL = "all"  # `?cluster=all`: a list of every cluster's rows (analyses, audit log)
_current: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "controlcenter_cluster", default=None)
_process: str | None = None  # the collector's one cluster, for every thread


def configured() -> tuple[KafkaCluster, ...]:
    return from_settings(settings)


def default_name() -> str:
    return str(settings.MILLRACE_CLUSTER_NAME)


def current_name() -> str:
    """The current cluster's name: the request's, the process's, else the default's."""
    return _current.get() or _process or str(settings.MILLRACE_CLUSTER_NAME)


def current() -> KafkaCluster:
    clusters = configured()
    return by_name(clusters, current_name()) or clusters[0]


class UnknownCluster(ValueError):
    """A cluster name no configured cluster has: a mistyped `?cluster=`, or a schedule or run
    saved for a cluster the platform no longer watches (restarted with fewer clusters)."""

    def __init__(self, name: str) -> None:
        self.name = name
        names = ", ".join(c.name for c in configured())
        super().__init__(f"Cluster {name!r} is not configured (configured: {names}).")


def checked(name: str) -> str:
    """`name` when a configured cluster has it; UnknownCluster otherwise (never the default
    in its place)."""
    if by_name(configured(), name) is None:
        raise UnknownCluster(name)
    return name


def listed(asked: str | None) -> str | None:
    """Whose rows a list shows for its `?cluster=`: the current cluster's when none is asked,
    every cluster's (None) for `all` (unless a cluster has that name), else the named one's;
    UnknownCluster for a name no configured cluster has."""
    if not asked:
        return current_name()
    if asked == ALL and by_name(configured(), ALL) is None:
        return None
    return checked(asked)


def activate_process(name: str) -> None:
    """Pin this process to one cluster (the collector of that cluster)."""
    global _process
    _process = name


@contextmanager
def using(name: str) -> Iterator[None]:
    """The current cluster is `name` inside the block (tests, one request)."""
    token = _current.set(name)
    try:
        yield
    finally:
        _current.reset(token)


def chosen(request: HttpRequest) -> str | None:
    """The request's cluster: `?cluster=` (kept in the session), else the session's; None
    for the default or a name no longer configured."""
    names = {c.name for c in configured()}
    asked = request.GET.get("cluster")
    session = getattr(request, "session", None)
    if asked in names and session is not None:
        session[SESSION_KEY] = asked
    name = asked if asked in names else (
        session.get(SESSION_KEY) if session is not None else None)
    return name if name in names else None


def session_cluster(session: Any) -> str | None:
    """The cluster a session chose when it is not the default one (a websocket's scope)."""
    names = [c.name for c in configured()]
    name = session.get(SESSION_KEY) if session is not None else None
    return name if name in names[1:] else None


class ClusterMiddleware:
    """Makes the session's cluster the current one for the request (after the session
    middleware). Sync and async, so it never makes Django adapt an async chain."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if iscoroutinefunction(self):
            return self._acall(request)
        with using(chosen(request) or ""):
            return self.get_response(request)

    async def _acall(self, request: HttpRequest) -> HttpResponseBase:
        from asgiref.sync import sync_to_async

        name = await sync_to_async(chosen)(request)  # the session reads its store
        with using(name or ""):
            response: Awaitable[HttpResponseBase] = self.get_response(request)
            return await response


M = TypeVar("M", bound=models.Model)


class ClusterScoped(models.Manager[M]):
    """A read-model manager: only the current cluster's rows."""

    def get_queryset(self) -> models.QuerySet[M]:
        return super().get_queryset().filter(cluster=current_name())
