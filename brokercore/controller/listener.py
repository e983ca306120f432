"""The controller listener: Raft messages and controller calls between brokers over TCP.

`ControllerServer` accepts connections on the `CONTROLLER` listener and reads frames
(`wire.py`). Raft frames go to the local `TcpTransport`'s handler; requests go to the
controller and are answered on the same connection, in any order (each carries its id).
`TcpTransport` keeps one outbound connection per peer voter for Raft messages, reconnecting
with backoff; sending is best effort, as Raft expects: while a peer is unreachable its
messages are dropped and Raft's own retries (heartbeats, elections) cover the loss.
`RpcClient` keeps one connection per target for forwarded controller calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from brokercore.protocol.errors import ErrorCode
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
                 on_request: RequestHandler) -> None:
        super().__init__(host, port)
        self.transport = transport
        self.on_request = on_request

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        calls: set[asyncio.Task[None]] = set()
        try:
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


class _Peer:
    """One outbound connection to a peer voter, fed from a bounded queue."""

    def __init__(self, node_id: int, sender_id: int, addresses: dict[int, Address]) -> None:
        self.node_id, self.sender_id, self.addresses = node_id, sender_id, addresses
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
                _, writer = await asyncio.open_connection(*self.addresses[self.node_id])
            except OSError:
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

    def __init__(self, node_id: int, voters: dict[int, Address]) -> None:
        self.node_id = node_id
        self.voters = voters
        self._handler: MessageHandler | None = None
        self._peers = {n: _Peer(n, node_id, voters) for n in voters if n != node_id}

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

    def __init__(self, addresses: dict[int, Address]) -> None:
        self.addresses = addresses
        self._connections: dict[int, _Connection] = {}
        self._ids = itertools.count()

    async def call(self, node_id: int, method: str, args: dict[str, Any]) -> tuple[Any, int]:
        """(result, offset) of `method` on `node_id`; ControllerError for an error answer,
        ConnectionError if the node cannot be reached. The caller bounds the wait."""
        connection = self._connections.get(node_id)
        if connection is None or not connection.open:
            reader, writer = await asyncio.open_connection(*self.addresses[node_id])
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
