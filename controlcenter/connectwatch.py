"""The Kafka Connect pages' live status: pushed over the page's websocket.

Connect's state lives in the worker's REST API, not in the collector's tables, so nothing
pushes it through the event groups. Instead, as the Messages page's live tail does, a page
asks its socket for a view (`{"type": "connect", "view": "list"}` or `"connector:<name>"`)
and becomes a follower of this web process's one `ConnectWatch`. A thread of the watch,
started by the first follower and ended when the last one leaves, reads each followed
view every PERIOD seconds, renders its fragment (the template the page includes) once,
and sends it only to that view's followers and only when it changed; a joining follower
gets the current fragment at once (a reconnect catches up). So a page costs the worker one
REST read per view and period for the whole process, whatever the number of browsers.

A view is one cluster's (the follower's session's: each cluster has its own Connect worker,
connectapi.url()), so two pages of the same connector name on two clusters are two views.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from django.template.loader import render_to_string

from controlcenter import clusters, live

log = logging.getLogger(__name__)
PERIOD = 1.0
Send = Callable[[str], None]  # thread-safe: hands one JSON text to one browser


@dataclass(eq=False)
class Follower:
    send: Send
    view: str  # "list" or "connector:<name>"
    cluster: str = ""  # whose Connect worker: the session's cluster ("": the default)

    @property
    def key(self) -> tuple[str, str]:
        return (self.cluster, self.view)


def parse_view(view: object) -> str:
    """A view a page may follow; ValueError otherwise."""
    if view == "list":
        return view
    if isinstance(view, str) and view.startswith("connector:") and 0 < len(view) - 10 <= 249:
        return view
    raise ValueError(f"{view!r} is not a Kafka Connect view")


def render(view: str) -> str:
    """The view's `fragment` message, as the page would render it now."""
    from controlcenter.pages import connect  # the pages import Django forms and actions

    if view == "list":
        html = render_to_string("controlcenter/fragments/connect_table.html",
                                connect.connectors_context())
        return json.dumps(live.fragment("connect-table", html))
    name = view.split(":", 1)[1]
    html = render_to_string("controlcenter/fragments/connector_status.html",
                            connect.connector_context(name))
    return json.dumps(live.fragment("connector-status", html))


class ConnectWatch:
    def __init__(self, render_view: Callable[[str], str] = render,
                 period: float = PERIOD) -> None:
        self.render_view, self.period = render_view, period  # render_view: current cluster's
        self.lock = threading.Lock()
        self.followers: list[Follower] = []
        self.last: dict[tuple[str, str], str] = {}  # (cluster, view) -> its last message
        self.fresh: list[Follower] = []  # joined since the last round: sent at once
        self.wake = threading.Event()
        self.thread: threading.Thread | None = None

    def join(self, follower: Follower) -> None:
        with self.lock:
            self.followers.append(follower)
            self.fresh.append(follower)
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="connect-watch",
                                               daemon=True)
                self.thread.start()
        self.wake.set()

    def leave(self, follower: Follower) -> None:
        with self.lock:
            if follower in self.followers:
                self.followers.remove(follower)

    def _run(self) -> None:
        try:
            while self._round():
                self.wake.wait(self.period)
                self.wake.clear()
        finally:
            from django.db import connections
            connections.close_all()

    def _round(self) -> bool:
        """One read of every followed view; False (and the thread ends) once none is."""
        with self.lock:
            followers, fresh, self.fresh = list(self.followers), self.fresh, []
            if not followers:
                self.thread = None
                self.last.clear()
                return False
        for key in sorted({f.key for f in followers}):
            try:
                with clusters.using(key[0]):
                    message = self.render_view(key[1])
            except Exception:  # a bug in a render: logged, the next round tries again
                log.exception("Kafka Connect view %s of %s could not be rendered", key[1],
                              key[0] or "the default cluster")
                continue
            changed = self.last.get(key) != message
            self.last[key] = message
            for follower in followers:
                if follower.key == key and (changed or follower in fresh):
                    follower.send(message)
        return True


WATCH = ConnectWatch()
