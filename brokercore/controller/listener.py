"""The controller listener: Raft messages and controller calls between brokers over TCP.

`ControllerServer` accepts connections on the `CONTROLLER` listener and reads frames
(`wire.py`). Raft frames go to the local `TcpTransport`'s handler; requests go to the
controller and are answered on the same connection, in any order (each carries its id).
`TcpTransport` keeps one outbound connection per peer voter for Raft messages, reconnecting
with backoff; sending is best effort, as Raft expects: while a peer is unreachable its
messages are dropped and Raft's own retries (heartbeats, elections) cover the loss.
`RpcClient` keeps one connection per target for forwarded controller calls.

A secured controller listener (its `listener.security.protocol.map` entry) is secured as a
Kafka listener is: TLS first on SSL and SASL_SSL (`ssl.client.auth` for mTLS), and on
SASL_PLAINTEXT and SASL_SSL a SASL login before any other frame, in two frame types of
its own, `{"sasl_handshake": MECHANISM}` and `{"sasl_authenticate": BASE64 TOKEN}`, each
answered like SaslHandshake and SaslAuthenticate. Outbound connections log in with the
listener's `sasl.mechanism.inter.broker.protocol` and JAAS username and password.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import logging
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

from brokercore.protocol.errors import ErrorCode
from brokercore.security.connection import (
    PLAINTEXT_CLIENT,
    AuthenticationFailed,
    ClientSecurity,
    ListenerSecurity,
    authenticate_with,
    open_secured,
)
from brokercore.security.sasl import SaslAuthenticator
from brokercore.tcp_server import TcpServer

from .errors import ControllerError
from .raft_transport import Message, MessageHandler
from .wire import FrameError, decode_message, encode_frame, encode_message, read_frame

log = logging.getLogger(__name__)

Address = tuple[str, int]
# (method, args) -> (result, offset); raises ControllerError for an answer with an error.
RequestHandler = Callable[[str, dict[str, Any]], Awaitable[tuple[Any, int]]]

QUEUE_LIMIT = 1024  # messages waiting for one peer's connection before we drop
MIN_BACKOFF, MAX_BACKOFF = 0.05, 1.0


class ControllerServer(TcpServer):
    def __init__(self, host: str, port: int, transport: TcpTransport,
                 on_request: RequestHandler, security: ListenerSecurity | None = None) -> None:
        super().__init__(host, port)
        self.transport = transport
        self.on_request = on_request
        self.security = security

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        calls: set[asyncio.Task[None]] = set()
        try:
            if not await self._secure(reader, writer):
                return
            while (frame := await read_frame(reader)) is not None:
                if "raft" in frame:
                    sender = frame.get("from")
                    if type(sender) is not int:
                        raise FrameError("raft frame without a sender")
                    self.transport.deliver(sender, decode_message(frame["raft"]))
                elif "request" in frame:
                    call = asyncio.create_task(self._answer(frame, writer))
                    calls.add(call)
                    call.add_done_callback(calls.discard)
                else:
                    raise FrameError("frame is neither a raft message nor a request")
        except FrameError as exc:
            log.warning("controller listener: closing a connection: %s", exc)
        finally:
            for call in calls:
                call.cancel()

    async def _secure(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """TLS, then the SASL login, as the listener wants; False (logged) to close."""
        security = self.security
        if security is None:
            return True
        if security.ssl_context is not None:
            try:
                await writer.start_tls(security.ssl_context, ssl_handshake_timeout=10)
            except (ssl.SSLError, OSError, TimeoutError) as exc:
                log.warning("controller listener: TLS handshake failed: %s", exc)
                return False
        if security.sasl is None:
            return True
        sasl = SaslAuthenticator(security.sasl)
        while not sasl.authenticated:
            frame = await read_frame(reader)
            if frame is None:
                return False
            writer.write(encode_frame(_sasl_answer(sasl, frame)))
            await writer.drain()
            if sasl.closing:
                log.warning("controller listener: closing a connection: SASL: %s",
                            sasl.failure)
                return False
        return True

    async def _answer(self, frame: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        answer: dict[str, Any] = {"response": frame["request"], "error_code": 0,
                                  "message": None, "result": None, "offset": -1}
        method, args = frame.get("method"), frame.get("args")
        try:
            if not isinstance(method, str) or not isinstance(args, dict):
                raise ControllerError(ErrorCode.INVALID_REQUEST,
                                      "a request needs a method and args")
            answer["result"], answer["offset"] = await self.on_request(method, args)
        except ControllerError as exc:
            answer["error_code"], answer["message"] = int(exc.error_code), exc.message
        except Exception as exc:  # a bug must not take the listener down; say so to the caller
            log.exception("controller call %s failed", method)
            answer["error_code"] = ErrorCode.UNKNOWN_SERVER_ERROR
            answer["message"] = f"{type(exc).__name__}: {exc}"
        with contextlib.suppress(ConnectionError, RuntimeError):
            writer.write(encode_frame(answer))
            await writer.drain()


def _sasl_answer(sasl: SaslAuthenticator, frame: dict[str, Any]) -> dict[str, Any]:
    if isinstance(frame.get("sasl_handshake"), str):
        shake = sasl.handshake(frame["sasl_handshake"], 1)
        return {"error_code": int(shake.error_code), "mechanisms": shake.mechanisms}
    token = frame.get("sasl_authenticate")
    try:
        raw = base64.b64decode(token, validate=True) if isinstance(token, str) else None
    except ValueError:
        raw = None
    if raw is None:
        sasl.closing, sasl.failure = True, "a frame other than the SASL login came first"
        return {"error_code": int(ErrorCode.ILLEGAL_SASL_STATE), "error_message": sasl.failure}
    result = sasl.authenticate(raw)
    return {"error_code": int(result.error_code), "error_message": result.error_message,
            "auth_bytes": base64.b64encode(result.auth_bytes).decode()}


class LoginRefused(ConnectionRefusedError):
    """The controller listener refused this node's SASL login."""


async def connect(address: Address, security: ClientSecurity
                  ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to a controller listener, secured and logged in as it wants.
    OSError (LoginRefused for a refused login) when it cannot be had."""
    reader, writer = await open_secured(address[0], address[1], security)

    async def ask(frame: dict[str, Any]) -> dict[str, Any]:
        writer.write(encode_frame(frame))
        await writer.drain()
        answer = await read_frame(reader)
        if answer is None:
            raise ConnectionResetError("the controller listener closed the connection")
        return answer

    async def handshake(mechanism: str) -> tuple[int, list[str]]:
        answer = await ask({"sasl_handshake": mechanism})
        return int(answer.get("error_code", -1)), list(answer.get("mechanisms", []))

    async def exchange(token: bytes) -> tuple[int, str | None, bytes]:
        answer = await ask({"sasl_authenticate": base64.b64encode(token).decode()})
        return (int(answer.get("error_code", -1)), answer.get("error_message"),
                base64.b64decode(answer.get("auth_bytes") or ""))

    try:
        await authenticate_with(handshake, exchange, security)
    except (AuthenticationFailed, FrameError) as exc:
        writer.close()
        raise LoginRefused(f"controller listener {address}: {exc}") from exc
    return reader, writer


class _Peer:
    """One outbound connection to a peer voter, fed from a bounded queue."""

    def __init__(self, node_id: int, sender_id: int, addresses: dict[int, Address],
                 security: ClientSecurity = PLAINTEXT_CLIENT) -> None:
        self.node_id, self.sender_id, self.addresses = node_id, sender_id, addresses
        self.security = security
        self.queue: asyncio.Queue[Message] = asyncio.Queue(QUEUE_LIMIT)
        self.task: asyncio.Task[None] | None = None

    def send(self, message: Message) -> None:
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(self._run())
        with contextlib.suppress(asyncio.QueueFull):
            self.queue.put_nowait(message)

    async def _run(self) -> None:
        backoff = MIN_BACKOFF
        while True:
            try:
                _, writer = await connect(self.addresses[self.node_id], self.security)
            except OSError as exc:
                if isinstance(exc, LoginRefused) and backoff == MIN_BACKOFF:
                    log.warning("controller listener: %s", exc)
                self._drop_queued()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF)
                continue
            backoff = MIN_BACKOFF
            try:
                while True:
                    message = await self.queue.get()
                    writer.write(encode_frame({"raft": encode_message(message),
                                               "from": self.sender_id}))
                    await writer.drain()
            except (ConnectionError, OSError):
                log.info("controller listener: lost connection to voter %d", self.node_id)
            finally:
                writer.close()

    def _drop_queued(self) -> None:
        while not self.queue.empty():
            self.queue.get_nowait()

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(BaseException):
                await self.task


class TcpTransport:
    """Raft's `Transport` over the controller listeners of the other voters."""

    def __init__(self, node_id: int, voters: dict[int, Address],
                 security: ClientSecurity = PLAINTEXT_CLIENT) -> None:
        self.node_id = node_id
        self.voters = voters
        self._handler: MessageHandler | None = None
        self._peers = {n: _Peer(n, node_id, voters, security) for n in voters if n != node_id}

    def bind(self, handler: MessageHandler) -> None:
        self._handler = handler

    def send(self, to: int, message: Message) -> None:
        peer = self._peers.get(to)
        if peer is not None:
            peer.send(message)

    def deliver(self, sender: int, message: Message) -> None:
        """A message from `sender`, as read by the server; voters only."""
        if self._handler is not None and sender in self._peers:
            self._handler(sender, message)

    async def close(self) -> None:
        for peer in self._peers.values():
            await peer.close()


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.reader_task = asyncio.create_task(self._read(reader))

    async def _read(self, reader: asyncio.StreamReader) -> None:
        error: Exception = ConnectionError("controller connection closed")
        try:
            while (frame := await read_frame(reader)) is not None:
                future = self.pending.pop(frame.get("response", -1), None)
                if future is not None and not future.done():
                    future.set_result(frame)
        except (FrameError, OSError) as exc:
            error = ConnectionError(str(exc))
        finally:
            self.writer.close()
            for future in self.pending.values():
                if not future.done():
                    future.set_exception(error)
            self.pending.clear()

    @property
    def open(self) -> bool:
        return not self.reader_task.done()


class RpcClient:
    """Controller calls to another node's controller listener (one connection per node)."""

    def __init__(self, addresses: dict[int, Address],
                 security: ClientSecurity = PLAINTEXT_CLIENT) -> None:
        self.addresses = addresses
        self.security = security
        self._connections: dict[int, _Connection] = {}
        self._ids = itertools.count()

    async def call(self, node_id: int, method: str, args: dict[str, Any]) -> tuple[Any, int]:
        """(result, offset) of `method` on `node_id`; ControllerError for an error answer,
        ConnectionError if the node cannot be reached. The caller bounds the wait."""
        connection = self._connections.get(node_id)
        if connection is None or not connection.open:
            reader, writer = await connect(self.addresses[node_id], self.security)
            connection = self._connections[node_id] = _Connection(reader, writer)
        request_id = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        connection.pending[request_id] = future
        try:
            connection.writer.write(encode_frame(
                {"request": request_id, "method": method, "args": args}))
            await connection.writer.drain()
            answer = await future
        finally:
            connection.pending.pop(request_id, None)
        if answer.get("error_code", 0) != 0:
            raise ControllerError.from_wire(int(answer["error_code"]), str(answer.get("message")))
        return answer.get("result"), int(answer.get("offset", -1))

    async def close(self) -> None:
        for connection in self._connections.values():
            connection.reader_task.cancel()
            with contextlib.suppress(BaseException):
                await connection.reader_task
        self._connections.clear()
