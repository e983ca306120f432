"""Values from the URL and query string, parsed the way Confluent's server parses them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar
from urllib.parse import unquote

from django.http import HttpRequest, QueryDict

from .errors import invalid_version

LATEST = -1
MAX_VERSION = 2**31 - 1
DEFAULT_CONTEXT = "."
T = TypeVar("T")


def flag(query: QueryDict, name: str, default: bool = False) -> bool:
    """Booleans are case-insensitive: Python clients send `True` and `False`."""
    value = query.get(name)
    return default if value is None else value.strip().lower() == "true"


def integer(query: QueryDict, name: str, default: int) -> int:
    value = query.get(name)
    try:
        return default if value is None else int(value)
    except ValueError:
        return default


def page(query: QueryDict, items: Sequence[T]) -> list[T]:
    """`offset` and `limit`; a `limit` of 0 or below means no limit."""
    offset = max(integer(query, "offset", 0), 0)
    limit = integer(query, "limit", -1)
    return list(items[offset : offset + limit] if limit > 0 else items[offset:])


def version(value: str) -> int:
    """A version number, or LATEST for `latest` and `-1`; 42202 otherwise."""
    if value.lower() == "latest":
        return LATEST
    try:
        number = int(value)
    except ValueError:
        raise invalid_version(value) from None
    if number == LATEST or 1 <= number <= MAX_VERSION:
        return number
    raise invalid_version(value)


def qualified_subject(subject: str) -> str:
    """`:.:name` (the default context spelled out) is the same subject as `name`."""
    prefix = f":{DEFAULT_CONTEXT}:"
    return subject[len(prefix) :] if subject.startswith(prefix) else subject


def context_of(subject: str) -> str:
    if subject.startswith(":.") and subject.count(":") >= 2:
        return subject[1 : subject.index(":", 1)]
    return DEFAULT_CONTEXT


def raw_subject(request: HttpRequest, decoded: str, segments_after: int) -> str:
    """The subject as sent, even when it contains an encoded `/`.

    Django routes on the decoded path, where `a%2Fb` has become two segments; the ASGI
    scope keeps the raw path, in which the subject is the one segment that sits
    `segments_after` segments before the end.
    """
    scope = getattr(request, "scope", None)
    raw = scope.get("raw_path") if isinstance(scope, dict) else None
    if not raw:
        return decoded
    parts = raw.decode("latin-1").rstrip("/").split("/")
    index = len(parts) - 1 - segments_after
    return unquote(parts[index]) if index > 0 else decoded
