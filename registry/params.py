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


SLASH = "\x00"  # stands for an encoded "/" while routing; cannot occur in a URL


def raw_tail(request: HttpRequest, decoded_tail: str) -> str:
    """The end of the path as sent, decoded except that `%2F` becomes SLASH.

    Django routes on the decoded path, where the subject `a%2Fb` has become two segments.
    The ASGI scope (or a WSGI server's RAW_URI) keeps the raw path; the registry routes
    subject paths on it, as Confluent's server does.
    """
    scope = getattr(request, "scope", None)
    raw: str | None = None
    if isinstance(scope, dict) and scope.get("raw_path"):
        raw = scope["raw_path"].decode("latin-1")
    elif request.META.get("RAW_URI"):
        raw = str(request.META["RAW_URI"]).split("?", 1)[0]
    if raw is None or len(raw) < len(decoded_tail):
        return decoded_tail
    tail = raw[len(raw) - _raw_length(raw, decoded_tail) :]
    return unquote(tail.replace("%2F", SLASH).replace("%2f", SLASH))


def _raw_length(raw: str, decoded_tail: str) -> int:
    """How many characters at the end of `raw` decode to `decoded_tail`."""
    for start in range(len(raw), -1, -1):
        if unquote(raw[start:]) == decoded_tail:
            return len(raw) - start
    return len(raw)


def path_value(value: str) -> str:
    return value.replace(SLASH, "/")
