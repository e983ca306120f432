"""A broker-to-broker Kafka connection: one request at a time, the broker's own codec.

On a secured inter-broker listener it is a TLS connection and authenticates with SASL
first (`brokercore.security.connection`), as any client would.

Followers use it to send Fetch, OffsetForLeaderEpoch and ListOffsets to a leader's Kafka
listener. Requests and responses are kafka-python's protocol classes, the same codec the
server decodes with, framed as on any client connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from typing import Any

from brokercore.security.connection import (
    PLAINTEXT_CLIENT,
    AuthenticationFailed,
    ClientSecurity,
    authenticate,
    open_secured,
)

_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")


class ConnectionFailed(Exception):
    """The peer went away, timed out or answered something that is not our response."""


class BrokerConnection:
    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str,
        timeout: float,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._client_id = client_id
        self._timeout = timeout
        self._correlation_id = 0

    @classmethod
    async def open(
        cls, host: str, port: int, client_id: str, socket_timeout: float,
        security: ClientSecurity = PLAINTEXT_CLIENT,
    ) -> BrokerConnection:
        """Connected, through TLS and authenticated with SASL if the listener wants them."""
        try:
            reader, writer = await asyncio.wait_for(
                open_secured(host, port, security, limit=2**20), socket_timeout
            )
        except (OSError, TimeoutError) as exc:
            raise ConnectionFailed(f"cannot connect to {host}:{port}: {exc!r}") from exc
        connection = cls(reader, writer, client_id, socket_timeout)
        try:
            await authenticate(connection.request, security)
        except AuthenticationFailed as exc:
            connection.close()
            raise ConnectionFailed(f"{host}:{port} refused our credentials: {exc}") from exc
        except ConnectionFailed:
            connection.close()
            raise
        return connection

    async def request(self, request: Any, version: int) -> Any:
        """Send `request` encoded for `version`; the decoded response."""
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        request.with_header(correlation_id=self._correlation_id, client_id=self._client_id)
        try:
            self._writer.write(bytes(request.encode(version=version, header=True, framed=True)))
            await asyncio.wait_for(self._writer.drain(), self._timeout)
            frame = await asyncio.wait_for(self._read_frame(), self._timeout)
        except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
            raise ConnectionFailed(f"request failed: {exc!r}") from exc
        (correlation_id,) = _CORRELATION.unpack_from(frame, 0)
        if correlation_id != self._correlation_id:
            raise ConnectionFailed(
                f"response for correlation id {correlation_id}, expected {self._correlation_id}"
            )
        try:
            return request.header.get_response_class().decode(frame, version=version, header=True)
        except Exception as exc:  # the codec raises many types for garbled bodies
            raise ConnectionFailed(f"cannot decode response: {exc!r}") from exc

    async def _read_frame(self) -> bytes:
        (size,) = _SIZE.unpack(await self._reader.readexactly(4))
        if size < 4:
            raise ConnectionFailed(f"response frame of {size} bytes")
        return await self._reader.readexactly(size)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._writer.close()
