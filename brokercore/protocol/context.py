"""What a handler knows about the request it answers, apart from the request body."""

from __future__ import annotations

from dataclasses import dataclass

from brokercore.protocol.framing import RequestHeader


class NoResponse:
    """Returned by a handler for a request that gets no response (Produce with acks=0)."""


NO_RESPONSE = NoResponse()


@dataclass(frozen=True, slots=True)
class RequestContext:
    header: RequestHeader
    peer: str

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str | None:
        return self.header.client_id
