"""The Kafka listener: sockets, framing and dispatch to the API handlers.

Each connection has a reading task and a writing task. The reader parses requests ahead and
starts each one's handler as its own task; the writer awaits those tasks in request order
and writes their responses, so responses leave in request order, as Kafka guarantees.
Produce requests run concurrently with the produce requests before them (an acks=all wait
must not hold up the next one: librdkafka keeps several in flight), their appends still in
request order (the connection's `AppendOrder`, in each request's context); any other
request first waits for everything before it to finish, and holds up everything after it,
so it sees the connection's requests one at a time as before. At most `MAX_IN_FLIGHT` requests are
pending per connection; beyond that the reader stops reading. A framing error, an unknown
API key or an unsupported version closes only that connection, once the responses to the
requests before it are written; everyone else is served on. Each connection is a
`FrameConnection` (`frame_connection.py`), which reads every frame, decrypted if the
listener uses TLS, straight into a buffer of its own.

A listener's security protocol (`brokercore/security/`) adds two steps: on SSL and SASL_SSL
the TLS handshake comes first (a failed one is logged once and closes the connection), and
on SASL_PLAINTEXT and SASL_SSL the connection's `SaslAuthenticator` gates every request
until it is authenticated: only ApiVersions and the SASL APIs are served before, one at a
time, and anything else, a failed authentication or an expired session closes it, as in
Kafka. The connection's principal (SASL user, else the TLS client certificate's DN, else
User:ANONYMOUS) goes into each request's context.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import struct
from dataclasses import dataclass
from typing import Any

from brokercore.frame_connection import BadFrameSize, FrameConnection
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import REGISTRY, Api, api_versions_entries
from brokercore.protocol.context import ANONYMOUS, NO_RESPONSE, AppendOrder, RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.protocol.framing import (
    FramingError,
    RequestHeader,
    encode_response,
    parse_header,
    skip_tagged_fields,
)
from brokercore.security.connection import ListenerSecurity
from brokercore.security.sasl import (
    SASL_AUTHENTICATE_KEY,
    SASL_HANDSHAKE_KEY,
    SaslAuthenticator,
    SaslFailure,
    SaslState,
)
from brokercore.security.tls import certificate_principal
from brokercore.tcp_server import TcpServer

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
API_VERSIONS_KEY = 18
PRODUCE_KEY = 0
MAX_IN_FLIGHT = 16
# What a stopping listener gives its connections to answer the requests they already
# received (then it closes them, answered or not); well inside shutdown.STEP_SECONDS.
DRAIN_SECONDS = 1.0
TLS_HANDSHAKE_SECONDS = 10
TLS_WRITE_CHUNK = 2**18  # bytes handed to the TLS transport at a time
_TLS_RECORD_START = (0x16, 0x03)  # a TLS handshake record: what a TLS client sends first


@dataclass
class _InFlight:
    task: asyncio.Task[bytes | None]
    produce: bool


class ConnectionClosed(Exception):
    """The connection's security says: close it (after the responses written so far)."""


@dataclass
class _Session:
    """One connection's identity: its SASL state, if the listener uses SASL."""

    peer: str
    principal: str = ANONYMOUS
    sasl: SaslAuthenticator | None = None
    appends: AppendOrder | None = None

    @property
    def current_principal(self) -> str:
        if self.sasl is not None and self.sasl.principal is not None:
            return self.sasl.principal
        return self.principal


class KafkaServer(TcpServer):
    def __init__(self, parts: BrokerParts, host: str, port: int,
                 security: ListenerSecurity | None = None) -> None:
        super().__init__(host, port, backlog=1024)
        self.parts = parts
        self.security = security or ListenerSecurity.plaintext(host, port)
        self.listener: str = self.security.spec.name
        self.node_id = parts.node_id
        self.max_request_bytes = parts.config.get_int("socket.request.max.bytes")
        self._open: set[FrameConnection] = set()

    async def stop(self, drain_seconds: float = DRAIN_SECONDS) -> None:
        """Stop listening, answer what each connection has received, then close it: a
        request that reached a stopping broker is answered or its connection closes at once,
        and a client never waits on a request the broker read and dropped."""
        await super().stop(drain_seconds)

    def _end_reading(self) -> None:
        for connection in list(self._open):
            connection.end_reading()

    async def _listen(self) -> asyncio.Server:
        return await asyncio.get_running_loop().create_server(
            self._accept, self.host or None, self.port, **self._server_options)

    def _accept(self) -> FrameConnection:
        return FrameConnection(self.max_request_bytes, self._connected,
                               tls=self.security.ssl_context is not None)

    def _connected(self, connection: FrameConnection) -> None:
        self._open.add(connection)
        self._track(asyncio.create_task(self._serve_connection(connection)))

    async def _serve_connection(self, connection: FrameConnection) -> None:
        try:
            await self._serving(self.handle_connection(connection), connection)
        finally:
            self._open.discard(connection)

    async def handle_connection(self, connection: FrameConnection) -> None:
        peername = connection.get_extra_info("peername")
        peer = f"{peername[0]}:{peername[1]}" if peername else "?"
        session = _Session(peer)
        if (self.security.ssl_context is not None
                and not await self._start_tls(connection, session)):
            return
        if self.security.sasl is not None:
            session.sasl = SaslAuthenticator(self.security.sasl)
        try:
            await self._serve_requests(connection, session)
        except FramingError as exc:
            log.warning("node %d: closing connection from %s on %s: %s", self.node_id, peer,
                        self.listener, exc)
        except ConnectionClosed as exc:
            log.warning("node %d: closing connection from %s on %s: %s", self.node_id, peer,
                        self.listener, exc)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            raise
        except Exception:
            log.exception("node %d: error serving %s; closing its connection",
                          self.node_id, peer)

    async def _start_tls(self, connection: FrameConnection, session: _Session) -> bool:
        """The TLS handshake; False (logged once) when it fails."""
        assert self.security.ssl_context is not None
        try:
            await connection.start_tls(self.security.ssl_context, TLS_HANDSHAKE_SECONDS)
        except (ssl.SSLError, OSError, TimeoutError) as exc:
            # A peer that connects and leaves without a word is a port probe, not an error.
            quiet = isinstance(exc, ConnectionResetError | ssl.SSLEOFError) or not str(exc)
            log.log(logging.DEBUG if quiet else logging.WARNING,
                    "node %d: TLS handshake with %s on %s failed: %s", self.node_id,
                    session.peer, self.listener, exc or type(exc).__name__)
            return False
        principal = certificate_principal(connection.get_extra_info("peercert"))
        if principal is not None:
            session.principal = principal
        return True

    async def _serve_requests(self, connection: FrameConnection, session: _Session) -> None:
        pending: asyncio.Queue[_InFlight | None] = asyncio.Queue(MAX_IN_FLIGHT)
        reading = asyncio.current_task()
        assert reading is not None
        peer = session.peer
        writing = asyncio.create_task(self._write_responses(pending, connection, reading, peer))
        try:
            await self._read_requests(connection, pending, session)
        except asyncio.CancelledError:
            raise
        except BaseException:
            # The requests before the bad one (or before the client's EOF) get their answers.
            if not writing.done():
                await pending.put(None)
                with contextlib.suppress(Exception):
                    await asyncio.shield(writing)
            raise
        finally:
            writing.cancel()
            while not pending.empty():
                item = pending.get_nowait()
                if item is not None:
                    item.task.cancel()

    async def _read_requests(
        self, connection: FrameConnection, pending: asyncio.Queue[_InFlight | None],
        session: _Session,
    ) -> None:
        running: list[_InFlight] = []
        session.appends = AppendOrder()
        sasl = session.sasl
        while True:
            frame = await self._read_frame(connection)
            if sasl is not None and sasl.state is SaslState.RAW_TOKEN:
                raw = _InFlight(asyncio.create_task(self._raw_token(sasl, frame)), False)
                await pending.put(raw)
                await asyncio.wait([raw.task])
                if sasl.closing:
                    raise ConnectionClosed(f"SASL: {sasl.failure}")
                continue
            prepared = self._prepare(frame, session)
            if sasl is not None and not isinstance(prepared, bytes):
                self._check_sasl(sasl, prepared[0])
            produce = not isinstance(prepared, bytes) and prepared[0].key == PRODUCE_KEY
            running = [r for r in running if not r.task.done()]
            if running and not (produce and all(r.produce for r in running)):
                await asyncio.wait([r.task for r in running])
            item = _InFlight(asyncio.create_task(self._respond(prepared)), produce)
            running.append(item)
            await pending.put(item)
            if sasl is not None and (not sasl.authenticated or _is_sasl(prepared)):
                # The SASL state decides how the next frame is read: let this one finish.
                await asyncio.wait([item.task])
                if sasl.closing:
                    raise ConnectionClosed(f"SASL: {sasl.failure}")

    async def _read_frame(self, connection: FrameConnection) -> memoryview:
        try:
            return await connection.read_frame()
        except BadFrameSize as exc:
            size = exc.size
            if (size >> 24, (size >> 16) & 0xFF) == _TLS_RECORD_START:
                raise FramingError(f"a TLS handshake on a {self.security.spec.protocol.value} "
                                   "listener") from None
            raise FramingError(
                f"request size {size} is outside 0..{self.max_request_bytes} "
                "(socket.request.max.bytes)"
            ) from None

    def _check_sasl(self, sasl: SaslAuthenticator, api: Api) -> None:
        """Kafka's gate: before authentication only ApiVersions and the SASL APIs; after
        the session expired (connections.max.reauth.ms) only a re-authentication."""
        if not sasl.permits(api.key):
            raise ConnectionClosed(f"{api.name} request during SASL {sasl.state.value}")
        if (sasl.authenticated and api.key != SASL_HANDSHAKE_KEY
                and sasl.session_expired()):
            raise ConnectionClosed(f"the SASL session of {sasl.principal} expired "
                                   "(connections.max.reauth.ms) without re-authentication")

    async def _raw_token(self, sasl: SaslAuthenticator, frame: memoryview) -> bytes:
        """Handshake v0: a bare token in, a bare token out; a failure closes unanswered."""
        try:
            answer = sasl.raw_token(bytes(frame))
        except SaslFailure:
            return b""  # the reader sees `closing` and closes the connection
        return _SIZE.pack(len(answer)) + answer

    async def _write_responses(
        self, pending: asyncio.Queue[_InFlight | None], connection: FrameConnection,
        reading: asyncio.Task[Any], peer: str,
    ) -> None:
        tls = self.security.ssl_context is not None
        while (item := await pending.get()) is not None:
            try:
                response = await item.task
            except Exception:
                log.exception("node %d: error serving %s; closing its connection",
                              self.node_id, peer)
                reading.cancel()
                return
            if response is None:
                continue
            if tls and len(response) > TLS_WRITE_CHUNK:
                # In slices, so OpenSSL's outgoing memory BIO stays small: encrypting a
                # whole fetch response at once grows it by reallocations that copy and
                # wipe every byte several times (bench/README.md, security_bench.py).
                view = memoryview(response)
                for start in range(0, len(view), TLS_WRITE_CHUNK):
                    connection.write(view[start:start + TLS_WRITE_CHUNK])
                    await connection.drain()  # waits only while the TLS buffer is full
            else:
                connection.write(response)
            if connection.write_buffer_size() > 2**20:
                await connection.drain()

    def _prepare(self, frame: memoryview,
                 session: _Session) -> bytes | tuple[Api, RequestContext, Any]:
        """The parsed request, or the finished answer to an unsupported ApiVersions."""
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
        if api.flexible(header.api_version):
            pos = skip_tagged_fields(frame, pos)
        request = self._decode(api, frame[pos:], header)
        assert session.appends is not None
        context = RequestContext(header, session.peer, session.appends,
                                 session.current_principal, self.listener, session.sasl)
        return api, context, request

    async def _respond(self, prepared: bytes | tuple[Api, RequestContext, Any]) -> bytes | None:
        if isinstance(prepared, bytes):
            return prepared
        api, context, request = prepared
        response = await api.handler(self.parts, context, request)
        if response is NO_RESPONSE:
            return None
        header = context.header
        body = response.encode(version=header.api_version)
        return encode_response(
            header.correlation_id, body,
            flexible_header=api.flexible(header.api_version)
            and header.api_key != API_VERSIONS_KEY,
        )

    def _decode(self, api: Api, body: memoryview, header: RequestHeader) -> Any:
        try:
            return api.request_class.decode(body, version=header.api_version)
        except Exception as exc:  # the codec raises many types for garbled bodies
            raise FramingError(
                f"cannot decode {api.name} v{header.api_version} from {header.client_id}: {exc!r}"
            ) from exc


def _is_sasl(prepared: bytes | tuple[Api, RequestContext, Any]) -> bool:
    return not isinstance(prepared, bytes) and prepared[0].key in (SASL_HANDSHAKE_KEY,
                                                                   SASL_AUTHENTICATE_KEY)


def unsupported_api_versions_response(correlation_id: int) -> bytes:
    """The v0-format ApiVersions error body every client can parse (KIP-511).

    error_code UNSUPPORTED_VERSION, an int32-length array of (key, min, max), nothing more.
    """
    entries = api_versions_entries()
    body = struct.pack(">hi", ErrorCode.UNSUPPORTED_VERSION, len(entries)) + b"".join(
        struct.pack(">hhh", *entry) for entry in entries
    )
    return encode_response(correlation_id, body, flexible_header=False)
