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
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.template.loader import render_to_string

KINDS = ("cluster", "overview", "brokers", "broker", "topics", "topic", "groups", "group",
         "schemas", "subject", "analyses", "analysis")
ALWAYS = "cluster"  # every live socket is in this group: the unreachable-cluster banner
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
        return kind
    text = str(key)
    if _SPELLABLE.match(text):
        return f"{kind}.{text}"
    return f"{kind}._{hashlib.sha256(text.encode()).hexdigest()[:40]}"


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


def register_rows(kind: str, list_kind: str, table_id: str, template: str,
                  contexts: RowContexts) -> None:
    """When objects of `kind` change, push their rows to the `list_kind` page group."""
    group_name(kind), group_name(list_kind)  # validates both
    _ROWS[kind] = Rows(list_kind, table_id, template, contexts)


def rows_of(kind: str) -> Rows | None:
    return _ROWS.get(kind)


def render_rows(kind: str, keys: list[str]) -> list[tuple[str, str]]:
    """(group, `rows` message) for these objects, each row rendered once: rows new to the
    list, and gone ones, to the list's group in batches; the others each to its row's
    group (`topics.orders`)."""
    rows = rows_of(kind)
    if rows is None or not keys:
        return []
    contexts = rows.contexts(keys)
    to_list, to_objects = [], []
    for key in keys:
        row = {"key": key, "html": None if key not in contexts
               else render_to_string(rows.template, dict(contexts[key]))}
        if key in contexts and key in rows.sent:
            to_objects.append((group_name(rows.list_kind, key), _rows_message(rows, [row])))
        else:
            to_list.append(row)
    rows.sent.update(key for key in keys if key in contexts)
    rows.sent.difference_update(key for key in keys if key not in contexts)
    return [(group_name(rows.list_kind), _rows_message(rows, to_list[i:i + ROWS_PER_MESSAGE]))
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
    objects, once and send them in one go.

    Returns the number of messages sent (one per fragment or row or batch of rows, never one
    per browser).
    """
    messages = [(group_name(kind, key), text)
                for kind, key in changed for text in render(kind, key)]
    for kind in dict.fromkeys(kind for kind, key in changed if key is not None):
        keys = [key for k, key in changed if k == kind and key is not None]
        messages += render_rows(kind, list(dict.fromkeys(keys)))
    if messages:
        async_to_sync(asend_all)(messages)
    return len(messages)
