"""The Kafka listener: sockets, framing and dispatch to the API handlers.

Each connection is served by one task that reads a request, hands it to its handler and
writes the response before reading the next, so responses leave in request order, as
Kafka guarantees. A framing error, an unknown API key or an unsupported version closes
only that connection; everyone else is served on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from brokercore.protocol.apis import REGISTRY, Api
from brokercore.protocol.errors import ErrorCode
from brokercore.protocol.framing import (
    FramingError,
    RequestHeader,
    encode_response,
    parse_header,
    skip_tagged_fields,
)

if TYPE_CHECKING:
    from brokercore.broker import Broker

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
API_VERSIONS_KEY = 18


class NoResponse:
    """Returned by a handler for a request that gets no response (Produce with acks=0)."""


NO_RESPONSE = NoResponse()


@dataclass
class RequestContext:
    broker: Broker
    header: RequestHeader
    peer: str

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str | None:
        return self.header.client_id


class KafkaServer:
    def __init__(self, broker: Broker, host: str, port: int) -> None:
        self.broker = broker
        self.host = host
        self.port = port
        self.max_request_bytes = broker.config.get_int("socket.request.max.bytes")
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(
            self._serve, self.host or None, self.port, limit=2**20, backlog=1024
        )
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        for task in list(self._connections):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peername = writer.get_extra_info("peername")
        peer = f"{peername[0]}:{peername[1]}" if peername else "?"
        try:
            await self._serve_requests(reader, writer, peer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client went away
        except asyncio.CancelledError:
            pass  # the broker is stopping; the connection just closes
        except FramingError as exc:
            log.warning("node %d: closing connection from %s: %s", self.broker.node_id, peer, exc)
        except Exception:
            log.exception("node %d: error serving %s; closing its connection",
                          self.broker.node_id, peer)
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _serve_requests(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str
    ) -> None:
        while True:
            (size,) = _SIZE.unpack(await reader.readexactly(4))
            if size < 0 or size > self.max_request_bytes:
                raise FramingError(
                    f"request size {size} is outside 0..{self.max_request_bytes} "
                    "(socket.request.max.bytes)"
                )
            frame = memoryview(await reader.readexactly(size))
            response = await self._dispatch(frame, peer)
            if response is not None:
                writer.write(response)
                if writer.transport.get_write_buffer_size() > 2**20:
                    await writer.drain()

    async def _dispatch(self, frame: memoryview, peer: str) -> bytes | None:
        header, pos = parse_header(frame)
        api = REGISTRY.get(header.api_key)
        if api is None:
            raise FramingError(f"unknown API key {header.api_key}")
        if not api.min_version <= header.api_version <= api.max_version:
            if header.api_key == API_VERSIONS_KEY:
                return unsupported_api_versions_response(header.correlation_id)
            raise FramingError(
                f"{api.name} v{header.api_version} is not supported "
                f"(v{api.min_version}-v{api.max_version})"
            )
        flexible = api.flexible(header.api_version)
        if flexible:
            pos = skip_tagged_fields(frame, pos)
        request = self._decode(api, frame[pos:], header)
        context = RequestContext(self.broker, header, peer)
        response = await api.handler(context, request)
        if response is NO_RESPONSE:
            return None
        body = response.encode(version=header.api_version)
        return encode_response(
            header.correlation_id, body,
            flexible_header=flexible and header.api_key != API_VERSIONS_KEY,
        )

    def _decode(self, api: Api, body: memoryview, header: RequestHeader) -> Any:
        try:
            return api.request_class.decode(body, version=header.api_version)
        except Exception as exc:  # the codec raises many types for garbled bodies
            raise FramingError(
                f"cannot decode {api.name} v{header.api_version} from {header.client_id}: {exc!r}"
            ) from exc


def api_versions_entries() -> list[tuple[int, int, int]]:
    return sorted((api.key, api.min_version, api.max_version) for api in REGISTRY.values())


def unsupported_api_versions_response(correlation_id: int) -> bytes:
    """The v0-format ApiVersions error body every client can parse (KIP-511).

    error_code UNSUPPORTED_VERSION, an int32-length array of (key, min, max), nothing more.
    """
    entries = api_versions_entries()
    body = struct.pack(">hi", ErrorCode.UNSUPPORTED_VERSION, len(entries)) + b"".join(
        struct.pack(">hhh", *entry) for entry in entries
    )
    return encode_response(correlation_id, body, flexible_header=False)
