"""What is pushed to browsers, and to which event group.

A page subscribes to event groups (`overview`, `brokers`, `broker.<id>`, `topics`,
`topic.<name>`, `groups`, `group.<id>`, and always `cluster`). When the collector (or an
action) sees something change it calls `publish_changed(kind, key)`: every fragment registered
for that kind (`register_fragment`, by `controlcenter/fragments.py` when the app is ready:
this module imports no page) is rendered ONCE from the read model and sent to the group,
whatever the number of browsers in it. The JSON of each message is built here once too;
consumers forward the text as is.

A list page (the topic list: 50 of any order, filtered) cannot be one fragment per group:
its rows are registered per object kind (`register_rows`). When an object changes its row
is rendered ONCE and sent in a `rows` message (a deleted object's as `html: null`): to the
list's page group when this publisher sends that row for the first time (a new object,
which any page of the list may have to insert) or when the object is gone; otherwise to
the row's own group, the list's kind with the object's key (`topics.orders`), which the
pages showing that row follow (frontend/js/liverows.js). A list page so gets the rows it
shows and the new ones, not every changed row of the cluster. Each page places what it
receives by its own sort and filter, so one render serves every view of the list.

Message formats (what frontend/js/live.js applies) are in frontend/README.md, "Live updates".

Several clusters: the groups of the read model's kinds (`CLUSTER_KINDS`: the banner, the
overview, brokers, topics, groups) are the current cluster's (`clusters.current_name()`).
The default cluster's keep their plain names (`topic.orders`); another's carry its name in
front (`_millrace-2.topic.orders`), so a page of millrace-2 follows the rows and the banner
of millrace-2's collector, and only those. The rest (schemas, analyses, security, streams)
is one for all clusters. Publishers and sockets need no cluster argument: a collector is
pinned to its cluster, a request and a socket run with the session's.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.template.loader import render_to_string

from controlcenter import clusters

KINDS = ("cluster", "overview", "brokers", "broker", "topics", "topic", "groups", "group",
         "schemas", "subject", "analyses", "analysis", "security", "streams", "stream")
ALWAYS = "cluster"  # every live socket is in this group: the unreachable-cluster banner
# The kinds whose objects belong to one cluster: their groups are per cluster (`scoped`).
CLUSTER_KINDS = frozenset(("cluster", "overview", "brokers", "broker", "topics", "topic",
                           "groups", "group"))
MAX_GROUP_NAME = 99  # Channels: group names under 100 characters
MESSAGE_TYPE = "live.message"  # the Channels handler: LiveConsumer.live_message
_SPELLABLE = re.compile(r"^[A-Za-z0-9._-]{1,80}$")


def group_name(kind: str, key: str | int | None = None) -> str:
    """The Channels group of a page (`overview`) or of one object (`topic.orders`).

    Channels spells group names with ASCII letters, digits, `-_.` under 100 characters; a
    group id can be any string, so keys that do not fit are hashed (`group.~` + sha256).
    """
    if kind not in KINDS:
        raise ValueError(f"unknown event group kind {kind!r}; one of {', '.join(KINDS)}")
    if key is None:
        group = kind
    elif _SPELLABLE.match(text := str(key)):
        group = f"{kind}.{text}"
    else:
        group = f"{kind}._{hashlib.sha256(text.encode()).hexdigest()[:40]}"
    return scoped(group) if kind in CLUSTER_KINDS else group


def scoped(group: str) -> str:
    """`group` of the current cluster: as is for the default one, else with the cluster's
    name in front (`_<name>.`; a cluster name has no `.` and no kind starts with `_`, so
    two clusters' groups never meet). A name too long for Channels is hashed whole."""
    name = clusters.current_name()
    if name == clusters.default_name():
        return group
    full = f"_{name}.{group}"
    if len(full) <= MAX_GROUP_NAME:
        return full
    return f"_{hashlib.sha256(full.encode()).hexdigest()[:40]}"


def parse_subscription(topic: str) -> str:
    """A browser's `topics=` entry (`topic.orders`, `group.my group`) as a Channels group."""
    kind, _, key = topic.partition(".")
    return group_name(kind, key or None)


# --- fragments ------------------------------------------------------------------------------

Context = Callable[[str | None], Mapping[str, Any]]


@dataclass(frozen=True)
class Fragment:
    element_id: str  # the id of the element the page renders with the same template
    template: str
    context: Context  # key (None for page groups) -> template context, from the read model


_FRAGMENTS: dict[str, list[Fragment]] = {}


def register_fragment(kind: str, element_id: str, template: str, context: Context) -> None:
    group_name(kind)  # validates the kind
    fragments = _FRAGMENTS.setdefault(kind, [])
    fragments[:] = [f for f in fragments if f.element_id != element_id]
    fragments.append(Fragment(element_id, template, context))


def fragments(kind: str) -> list[Fragment]:
    return list(_FRAGMENTS.get(kind, ()))


# --- rows of list pages ---------------------------------------------------------------------

RowContexts = Callable[[list[str]], Mapping[str, Mapping[str, Any]]]
ROWS_PER_MESSAGE = 200


@dataclass(frozen=True)
class Rows:
    list_kind: str  # the list page's group ("topics")
    table_id: str  # the id of its <table>; each <tr> carries data-key and data-values
    template: str  # one row
    contexts: RowContexts  # keys -> the template context of each key that still exists
    sent: set[str] = field(default_factory=set)  # keys this process has sent to the list


_ROWS: dict[str, Rows] = {}
Followed = frozenset[str]  # the event groups a browser has open (`followed_groups`)


def register_rows(kind: str, list_kind: str, table_id: str, template: str,
                  contexts: RowContexts) -> None:
    """When objects of `kind` change, push their rows to the `list_kind` page group."""
    group_name(kind), group_name(list_kind)  # validates both
    _ROWS[kind] = Rows(list_kind, table_id, template, contexts)


def rows_of(kind: str) -> Rows | None:
    return _ROWS.get(kind)


def render_rows(kind: str, keys: list[str], followed: Followed | None = None
                ) -> list[tuple[str, str]]:
    """(group, `rows` message) for these objects, each row rendered once: rows new to the
    list, and gone ones, to the list's group in batches; the others each to its row's
    group (`topics.orders`).

    `followed` (default: every group) are the groups a browser has open: a row nobody
    would receive is not rendered. A row skipped while no list page is open is forgotten
    as sent, so its next change goes to the list's group as a new row."""
    rows = rows_of(kind)
    if rows is None or not keys:
        return []
    list_group = group_name(rows.list_kind)
    listed = followed is None or list_group in followed
    own = {key: group_name(rows.list_kind, key) for key in keys}
    asked = [key for key in keys if listed or own[key] in (followed or ())]
    rows.sent.difference_update(set(keys) - set(asked))
    contexts = rows.contexts(asked) if asked else {}
    to_list, to_objects = [], []
    for key in asked:
        if key in contexts and (key in rows.sent or not listed):
            if followed is None or own[key] in followed:  # else only a list is open, without it
                html = render_to_string(rows.template, dict(contexts[key]))
                to_objects.append((own[key], _rows_message(rows, [{"key": key, "html": html}])))
                rows.sent.add(key)
            continue
        to_list.append({"key": key, "html": None if key not in contexts
                        else render_to_string(rows.template, dict(contexts[key]))})
        if key in contexts:
            rows.sent.add(key)
        else:
            rows.sent.discard(key)
    return [(list_group, _rows_message(rows, to_list[i:i + ROWS_PER_MESSAGE]))
            for i in range(0, len(to_list), ROWS_PER_MESSAGE)] + to_objects


def _rows_message(rows: Rows, items: list[dict[str, str | None]]) -> str:
    return json.dumps({"type": "rows", "table": rows.table_id, "rows": items})


def render(kind: str, key: str | None = None) -> list[str]:
    """Every registered fragment of the kind, rendered once, as the JSON sent to browsers.

    Fragments that share a context function (a topic's summary, map and partitions) share
    one call of it: the collector renders hundreds of changed objects a cycle, and each
    context is a few queries (a round trip each on PostgreSQL)."""
    contexts: dict[Context, Mapping[str, Any]] = {}
    messages = []
    for f in fragments(kind):
        if f.context not in contexts:
            contexts[f.context] = f.context(key)
        messages.append(fragment_message(f.element_id,
                                         render_to_string(f.template, dict(contexts[f.context]))))
    return messages


def fragment_message(element_id: str, html: str) -> str:
    return json.dumps({"type": "fragment", "id": element_id, "html": html})


def banner_message(level: str, text: str) -> str:
    """level "error" shows the cluster banner, "ok" clears it (live.banner's format, the one
    frontend/js/live.js applies: key "cluster", active false to clear)."""
    from controlcenter import live

    if level == "error":
        return json.dumps(live.banner("cluster", text, "error"))
    return json.dumps(live.banner("cluster", text, "info", active=False))


# --- publishing -----------------------------------------------------------------------------


async def apublish(group: str, text: str) -> None:
    await asend_all([(group, text)])


async def asend_all(messages: list[tuple[str, str]]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    for group, text in messages:
        await layer.group_send(group, {"type": MESSAGE_TYPE, "text": text})


def publish(group: str, text: str) -> None:
    """Send one ready JSON message to every browser in `group` (from sync code)."""
    async_to_sync(asend_all)([(group, text)])


def publish_changes(changed: list[tuple[str, str | None]]) -> int:
    """Render the fragments of every changed (kind, key), and the list rows of the changed
    objects, once and send them in one go: only those of groups a browser has open
    (`followed`), as a page that opens later is rendered from the same tables.

    Returns the number of messages sent (one per fragment or row or batch of rows, never one
    per browser).
    """
    followed = followed_groups(changed)
    messages = [(group_name(kind, key), text) for kind, key in changed
                if followed is None or group_name(kind, key) in followed
                for text in render(kind, key)]
    for kind in dict.fromkeys(kind for kind, key in changed if key is not None):
        keys = [key for k, key in changed if k == kind and key is not None]
        messages += render_rows(kind, list(dict.fromkeys(keys)), followed)
    if messages:
        async_to_sync(asend_all)(messages)
    return len(messages)


def followed_groups(changed: list[tuple[str, str | None]]) -> Followed | None:
    """Of the groups these changes would be sent to (their fragments' and their rows'),
    those a browser follows now, as the channel layer says; None when it cannot say
    (then every group counts). Asked once per batch: one round trip to the hub or Redis."""
    layer = get_channel_layer()
    if layer is None:
        return frozenset()
    groups = {group_name(kind, key) for kind, key in changed}
    for kind, key in changed:
        rows = rows_of(kind) if key is not None else None
        if rows is not None:
            groups |= {group_name(rows.list_kind), group_name(rows.list_kind, key)}
    ask = getattr(layer, "occupied", None) or _redis_occupied(layer)
    if ask is None:
        return None
    return frozenset(async_to_sync(ask)(sorted(groups)))


def _redis_occupied(layer: Any) -> Callable[[list[str]], Any] | None:
    """channels-redis keeps each group's members in a sorted set scored by the time they
    joined (expired after `group_expiry`): a group is followed while it has a live one."""
    try:
        from channels_redis.core import RedisChannelLayer
    except ImportError:
        return None
    if not isinstance(layer, RedisChannelLayer):
        return None

    async def occupied(groups: list[str]) -> set[str]:
        oldest = int(time.time()) - layer.group_expiry
        by_shard: dict[int, list[str]] = {}
        for group in groups:
            by_shard.setdefault(layer.consistent_hash(group), []).append(group)
        found: set[str] = set()
        for shard, names in by_shard.items():  # one pipelined round trip per Redis host
            async with layer.connection(shard).pipeline(transaction=False) as pipe:
                for group in names:
                    pipe.zcount(layer._group_key(group), oldest, "+inf")
                counts = await pipe.execute()
            found.update(g for g, n in zip(names, counts, strict=True) if n)
        return found

    return occupied
