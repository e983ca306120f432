"""The table of Kafka APIs this broker serves.

Each handler module registers the API it implements, with the versions it serves, through
`serves`. ApiVersions is derived from this table, never hand-listed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from brokercore.handlers.parts import BrokerParts
from brokercore.protocol.context import RequestContext

# (the broker's parts, the request's context, the decoded request) -> the response
Handler = Callable[[BrokerParts, RequestContext, Any], Awaitable[Any]]


@dataclass(frozen=True)
class Api:
    key: int
    name: str
    min_version: int
    max_version: int
    request_class: Any
    response_class: Any
    handler: Handler

    def flexible(self, version: int) -> bool:
        return bool(self.request_class.flexible_version_q(version))


REGISTRY: dict[int, Api] = {}


def serves(
    request_class: Any, response_class: Any, *, min_version: int, max_version: int
) -> Callable[[Handler], Handler]:
    """Register the decorated coroutine as the handler of one API's versions."""

    def register(handler: Handler) -> Handler:
        key = int(request_class.API_KEY)
        if key in REGISTRY:
            raise RuntimeError(f"API key {key} registered twice")
        if max_version > request_class.max_version:
            raise RuntimeError(f"{request_class.__name__} has no v{max_version} in the codec")
        name = request_class.__name__.removesuffix("Request")
        REGISTRY[key] = Api(
            key, name, min_version, max_version, request_class, response_class, handler
        )
        return handler

    return register


def api_versions_entries() -> list[tuple[int, int, int]]:
    """(key, min, max) of every API served, by key: what ApiVersions answers."""
    return sorted((api.key, api.min_version, api.max_version) for api in REGISTRY.values())
