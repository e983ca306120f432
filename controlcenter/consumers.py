"""The live websocket: one per open page, at /ws/live/?topics=overview,topic.orders.

The consumer joins the event groups the page names (plus `cluster`, for the banner) and
forwards what `events` publishes. It renders nothing: the collector rendered each fragment
once for every browser in the group (events.py), so a message costs a socket write here.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import parse_qs

from channels.generic.websocket import AsyncWebsocketConsumer

from controlcenter import events

log = logging.getLogger(__name__)
MAX_SUBSCRIPTIONS = 50


class LiveConsumer(AsyncWebsocketConsumer):  # type: ignore[misc]  # channels is untyped
    joined: list[str]

    async def connect(self) -> None:
        self.joined = []
        try:
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

    async def disconnect(self, code: int) -> None:
        if self.channel_layer is not None:
            for group in self.joined:
                await self.channel_layer.group_discard(group, self.channel_name)
        self.joined = []

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None
                      ) -> None:
        """Pages only listen; anything they send is ignored."""

    async def live_message(self, event: dict[str, Any]) -> None:
        await self.send(text_data=event["text"])


def subscriptions(query_string: bytes) -> list[str]:
    """The Channels groups of `?topics=a,b` (comma-separated, repeatable), `cluster` first."""
    query = parse_qs(query_string.decode("utf-8", "replace"))
    names = [name.strip() for value in query.get("topics", []) for name in value.split(",")]
    groups = [events.ALWAYS]
    for name in filter(None, names):
        group = events.parse_subscription(name)
        if group not in groups:
            groups.append(group)
    if len(groups) > MAX_SUBSCRIPTIONS:
        raise ValueError(f"{len(groups)} event groups asked; at most {MAX_SUBSCRIPTIONS}")
    return groups
