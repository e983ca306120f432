"""The live protocol between the server and `frontend/js/live.js`, as Python values.

A page opens one websocket to `/ws/live/?topics=a,b` (each topic percent-encoded on its
own, joined by commas) and receives JSON messages built here. The format is described in
frontend/README.md ("Live updates"); the consumer that serves it builds its messages with
these functions so both sides agree on one definition.
"""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import unquote

Swap = Literal["outer", "inner", "beforeend", "afterbegin"]
BannerLevel = Literal["error", "warn", "info"]

MAX_TOPICS = 64
MAX_TOPIC_LENGTH = 512  # a topic name (249) or group id with its prefix fits


class BadTopics(ValueError):
    """The query string does not name topics the way live.js does."""


def parse_topics(query_string: bytes | str) -> list[str]:
    """The topics of `?topics=a,b%2Cc` in order, without duplicates: ["a", "b,c"].

    Splits on the raw commas before decoding, so a comma inside a consumer group id
    (sent as %2C) stays part of it.
    """
    raw = query_string.decode("latin-1") if isinstance(query_string, bytes) else query_string
    values = [pair[len("topics="):] for pair in raw.split("&") if pair.startswith("topics=")]
    topics: list[str] = []
    for value in values:
        for item in value.split(","):
            topic = unquote(item)
            if topic and topic not in topics:
                topics.append(topic)
    if len(topics) > MAX_TOPICS:
        raise BadTopics(f"at most {MAX_TOPICS} topics per connection, got {len(topics)}")
    too_long = [t for t in topics if len(t) > MAX_TOPIC_LENGTH]
    if too_long:
        raise BadTopics(f"topic longer than {MAX_TOPIC_LENGTH} characters: {too_long[0][:40]}...")
    return topics


def fragment(element_id: str, html: str, swap: Swap = "outer") -> dict[str, Any]:
    """Replace (or fill, or append to) the element with this id by server-rendered HTML.
    With the default "outer" swap the HTML's root element must carry the same id."""
    message: dict[str, Any] = {"type": "fragment", "id": element_id, "html": html}
    if swap != "outer":
        message["swap"] = swap
    return message


def banner(key: str, text: str = "", level: BannerLevel = "error",
           active: bool = True) -> dict[str, Any]:  # fmt: skip
    """Show (or, with active=False, clear) the page-wide banner `key`, e.g. "cluster"."""
    return {"type": "banner", "key": key, "level": level, "text": text, "active": active}


def data(topic: str, name: str, payload: Any) -> dict[str, Any]:
    """Values for page scripts (chart points): re-emitted in the page as a `live:data`
    DOM event."""
    return {"type": "data", "topic": topic, "name": name, "data": payload}
