"""What a handler knows about the request it answers, apart from the request body."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from brokercore.protocol.framing import RequestHeader


class NoResponse:
    """Returned by a handler for a request that gets no response (Produce with acks=0)."""


NO_RESPONSE = NoResponse()


class AppendOrder:
    """Keeps one connection's Produce appends in request order.

    The server runs a connection's Produce requests concurrently, and a handler that appends
    before its first await keeps request order for free (tasks start in creation order). A
    handler that must await something before appending (KIP-890 verification) takes a turn
    instead; while turns are taken (`waiting`), every later Produce of the connection takes
    one too, and a turn starts only when the one before it has appended.
    """

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: asyncio.Future[None] | None = None

    @property
    def waiting(self) -> bool:
        return self._last is not None

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        before = self._last
        mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._last = mine  # before any await: later requests line up behind this one
        try:
            if before is not None:
                # shielded: a cancelled request must not cancel the turn of the one before
                await asyncio.shield(before)
            yield
        finally:
            mine.set_result(None)
            if self._last is mine:
                self._last = None


ANONYMOUS = "User:ANONYMOUS"


@dataclass(frozen=True, slots=True)
class RequestContext:
    header: RequestHeader
    peer: str
    appends: AppendOrder = field(default_factory=AppendOrder)  # the connection's
    # Who sent it, as the authorizer names principals ("User:alice"): the connection's SASL or
    # TLS identity once authenticated, Kafka's User:ANONYMOUS on a PLAINTEXT listener.
    principal: str = ANONYMOUS
    # The listener the request came in on (Metadata answers with that listener's endpoints).
    listener: str = "PLAINTEXT"
    # The connection's SASL state (brokercore.security.sasl.SaslAuthenticator), which the
    # SASL handlers advance; None on a listener without SASL.
    sasl: Any = None

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str | None:
        return self.header.client_id
