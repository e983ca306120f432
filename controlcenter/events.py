"""What is pushed to browsers, and to which event group.

A page subscribes to event groups (`overview`, `brokers`, `broker.<id>`, `topics`,
`topic.<name>`, `groups`, `group.<id>`, and always `cluster`). When the collector (or an
action) sees something change it calls `publish_changed(kind, key)`: every fragment registered
for that kind (`register_fragment`, in `controlcenter/fragments.py`) is rendered ONCE from the
read model and sent to the group, whatever the number of browsers in it. The JSON of each
message is built here once too; consumers forward the text as is.

Message formats (what frontend/js/live.js applies) are in README.md, "Live pushes".
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
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
    from controlcenter import fragments as registrations  # noqa: F401  (they register)

    return list(_FRAGMENTS.get(kind, ()))


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
    """Render the fragments of every changed (kind, key) once and send them in one go.

    Returns the number of messages sent (one per fragment, never one per browser).
    """
    messages = [(group_name(kind, key), text)
                for kind, key in changed for text in render(kind, key)]
    if messages:
        async_to_sync(asend_all)(messages)
    return len(messages)
