"""The live websocket: one per open page, at /ws/live/?topics=overview,topic.orders.

The consumer joins the event groups the page names (plus `cluster`, for the banner) and
forwards what `events` publishes. It renders nothing: the collector rendered each fragment
once for every browser in the group (events.py), so a message costs a socket write here.

A socket that reconnects (`?resync=1`, which live.js adds after a lost connection) first
gets what it may have missed: the cluster banner as it stands and the current fragments of
each page group it names, read from the collector's tables. Pushes are sent once, on
change, so without this a page would show a pre-outage value (or miss the "cluster
unreachable" banner) until the next change. A first connect gets nothing: the page was
rendered from the same tables a moment ago.

The Messages page also asks this socket for its live tail ({"type": "tail", ...}, stopped
by {"type": "untail"} or by closing): the browser follows this process's shared tail of
the topic (livetail.py), whose pushes come straight to this socket. The Kafka Connect
pages ask for their view ({"type": "connect", "view": ...}) the same way (connectwatch.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.contrib.auth.models import AnonymousUser

from controlcenter import clusters, connectwatch, events, live, livetail
from controlcenter.access import may_view
from controlcenter.messagebrowser import MessageQuery

log = logging.getLogger(__name__)
MAX_SUBSCRIPTIONS = 128  # a topic list follows its 50 rows' groups besides its own


class LiveConsumer(AsyncWebsocketConsumer):  # type: ignore[misc]  # channels is untyped
    joined: list[str]
    cluster = ""  # the session's cluster when not the default ("": the default)
    tailing: tuple[str, livetail.Follower] | None = None
    watching: connectwatch.Follower | None = None

    async def connect(self) -> None:
        self.joined = []
        if not may_view(self.scope.get("user") or AnonymousUser()):
            await self.close(code=4401)
            return
        # The session's cluster (the switcher's choice) for the socket's life: its groups
        # are that cluster's (events.scoped), fed by that cluster's collector.
        self.cluster = await database_sync_to_async(clusters.session_cluster)(
            self.scope.get("session")) or ""
        try:
            with clusters.using(self.cluster):
                groups = subscriptions(self.scope.get("query_string", b""))
        except ValueError as exc:
            log.info("live socket refused: %s", exc)
            await self.close(code=4400)
            return
        if self.channel_layer is None:
            await self.close(code=1011)
            return
        for group in groups:
            await self.channel_layer.group_add(group, self.channel_name)
            self.joined.append(group)
        await self.accept()
        if b"resync=1" in self.scope.get("query_string", b"").split(b"&"):
            for text in await database_sync_to_async(current_state)(
                    live.parse_topics(self.scope["query_string"]), self.cluster):
                await self.send(text_data=text)

    async def disconnect(self, code: int) -> None:
        self.stop_tail()
        self.stop_watch()
        if self.channel_layer is not None:
            for group in self.joined:
                await self.channel_layer.group_discard(group, self.channel_name)
        self.joined = []

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None
                      ) -> None:
        """Pages listen; they may follow more groups or fewer (list rows) and ask for the
        Messages page's live tail."""
        try:
            request = json.loads(text_data or "")
        except ValueError:
            return
        kind = request.get("type") if isinstance(request, dict) else None
        if kind == "tail":
            await self.start_tail(request)
        elif kind == "untail":
            self.stop_tail()
        elif kind in ("subscribe", "unsubscribe"):
            await self.follow(kind == "subscribe", request.get("topics"))
        elif kind == "connect":
            self.watch(request.get("view"))

    async def follow(self, join: bool, topics: Any) -> None:
        """Join or leave event groups (a list page following the rows it shows); names
        that are not event groups, `cluster`, and joins past MAX_SUBSCRIPTIONS are ignored."""
        if not isinstance(topics, list) or self.channel_layer is None:
            return
        with clusters.using(self.cluster):
            always = events.group_name(events.ALWAYS)
        for topic in topics:
            try:
                with clusters.using(self.cluster):
                    group = events.parse_subscription(str(topic))
            except ValueError:
                continue
            if join and group not in self.joined and len(self.joined) < MAX_SUBSCRIPTIONS:
                await self.channel_layer.group_add(group, self.channel_name)
                self.joined.append(group)
            elif not join and group in self.joined and group != always:
                await self.channel_layer.group_discard(group, self.channel_name)
                self.joined.remove(group)

    async def start_tail(self, request: dict[str, Any]) -> None:
        self.stop_tail()
        try:
            topic, query, positions = tail_request(request)
        except ValueError as exc:
            await self.send(text_data=livetail.tail_banner(f"Live tail refused: {exc}"))
            return
        loop = asyncio.get_running_loop()

        def send(text: str) -> None:  # called on the tail's thread
            # Until the browser leaves: the tail may still push once before it sees that.
            if self.tailing is not None and self.tailing[1] is follower and not loop.is_closed():
                asyncio.run_coroutine_threadsafe(self.send(text_data=text), loop)

        follower = livetail.Follower(send, query, positions)
        self.tailing = (topic, follower)
        try:
            livetail.TAILS.join(topic, follower, self.cluster)
        except livetail.TailError as exc:
            self.tailing = None
            await self.send(text_data=livetail.tail_banner(f"Live tail refused: {exc}"))

    def stop_tail(self) -> None:
        if self.tailing is not None:
            livetail.TAILS.leave(*self.tailing, self.cluster)
            self.tailing = None

    def watch(self, view: Any) -> None:
        """Follow a Kafka Connect view (connectwatch.py): its fragment when it changes."""
        self.stop_watch()
        try:
            name = connectwatch.parse_view(view)
        except ValueError:
            return
        loop = asyncio.get_running_loop()

        def send(text: str) -> None:  # called on the watch's thread
            if self.watching is follower and not loop.is_closed():
                asyncio.run_coroutine_threadsafe(self.send(text_data=text), loop)

        follower = connectwatch.Follower(send, name, self.cluster)
        self.watching = follower
        connectwatch.WATCH.join(follower)

    def stop_watch(self) -> None:
        if self.watching is not None:
            connectwatch.WATCH.leave(self.watching)
            self.watching = None

    async def live_message(self, event: dict[str, Any]) -> None:
        await self.send(text_data=event["text"])


def tail_request(request: dict[str, Any]) -> tuple[str, MessageQuery, dict[int, int]]:
    """The topic, filters and start of {"type": "tail", "topic", "filters", "positions"},
    checked like the Messages page's own form; ValueError says what is wrong."""
    from controlcenter.pages.messages import BrowseForm  # the pages import Django forms

    topic = request.get("topic")
    if not isinstance(topic, str) or not livetail.TOPIC_NAME.match(topic):
        raise ValueError(f"{topic!r} is not a topic name")
    filters = request.get("filters") or {}
    if not isinstance(filters, dict):
        raise ValueError("filters are an object of the browse form's fields")
    form = BrowseForm({k: filters.get(k, "") for k in ("partition", "key", "value", "header")})
    if not form.is_valid():
        raise ValueError(form.errors.as_text())
    data = form.cleaned_data
    query = MessageQuery(topic, partition=data.get("partition"), key=data.get("key") or "",
                         value=data.get("value") or "", header=data.get("header") or "")
    return topic, query, livetail.parse_positions(str(request.get("positions") or ""))


def subscriptions(query_string: bytes) -> list[str]:
    """The Channels groups of `?topics=a,b` (comma-separated, repeatable; a comma inside a
    group id is sent as %2C), `cluster` first."""
    groups = [events.group_name(events.ALWAYS)]
    for name in live.parse_topics(query_string):
        group = events.parse_subscription(name)
        if group not in groups:
            groups.append(group)
    if len(groups) > MAX_SUBSCRIPTIONS:
        raise ValueError(f"{len(groups)} event groups asked; at most {MAX_SUBSCRIPTIONS}")
    return groups


def current_state(topics: list[str], cluster: str = "") -> list[str]:
    """The messages that bring a reconnected page up to date: the cluster banner (shown,
    or cleared) and every fragment of each page group in `topics` as the collector would
    push it now, from `cluster`'s rows ("": the default's)."""
    with clusters.using(cluster):
        return _current_state(topics)


def _current_state(topics: list[str]) -> list[str]:
    from controlcenter.models import ClusterState  # models need the app registry
    from controlcenter.pages.banners import cluster_banners

    banners = cluster_banners(ClusterState.current())
    texts = [json.dumps(live.banner(b.key, b.text, "warn" if b.level == "warn" else "error"))
             for b in banners] or [events.banner_message("ok", "cluster reachable")]
    for topic in topics:
        kind, _, key = topic.partition(".")
        texts.extend(events.render(kind, key or None))
    return texts
