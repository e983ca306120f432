"""The one way a broker listens on TCP: the Kafka, controller and metrics listeners.

`TcpServer` binds (port 0 picks a free one), gives each connection a task running the
subclass's `handle`, and on `stop` closes the socket and ends every connection, so a
stopping broker never leaves a half-served peer behind: given `drain_seconds`, each
connection first stops reading (`_end_reading`) and has that long to answer the requests
it already received and close; whatever is left then is cancelled and closed. `handle`
deals with its protocol's errors; whatever escapes it ends only that connection.

The controller and metrics listeners read with asyncio streams (`handle(reader, writer)`);
the Kafka listener binds its own protocol (`_listen`, `brokercore/frame_connection.py`) and
runs its connections through the same `_serving` and `_track`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from typing import Any, Protocol

log = logging.getLogger(__name__)


class Closable(Protocol):
    def close(self) -> None: ...

    async def wait_closed(self) -> None: ...


class TcpServer:
    def __init__(self, host: str, port: int, **server_options: Any) -> None:
        self.host = host
        self.port = port
        self._server_options = server_options
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError

    async def start(self) -> int:
        """Listen; the bound port."""
        self._server = await self._listen()
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self, drain_seconds: float = 0.0) -> None:
        if self._server is not None:
            self._server.close()
        if drain_seconds > 0 and self._connections:
            self._end_reading()
            await asyncio.wait(list(self._connections), timeout=drain_seconds)
        for task in list(self._connections):
            task.cancel()
        for task in list(self._connections):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._server is not None:
            await self._server.wait_closed()

    def _end_reading(self) -> None:
        """Stop reading requests on every connection, so that each ends once it has answered
        those it has (a subclass that can; by default connections are just cancelled)."""

    async def _listen(self) -> asyncio.Server:
        return await asyncio.start_server(
            self._serve, self.host or None, self.port, **self._server_options
        )

    def _track(self, task: asyncio.Task[None]) -> None:
        """A connection's task, cancelled by `stop`."""
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._track(task)
        await self._serving(self.handle(reader, writer), writer)

    async def _serving(self, serving: Awaitable[None], connection: Closable) -> None:
        """Run one connection's handler, then close the connection however it ended."""
        try:
            await serving
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # the peer went away, or we are stopping: the connection just closes
        except Exception:
            log.exception("%s: error serving a connection; closing it", type(self).__name__)
        finally:
            connection.close()
            with contextlib.suppress(Exception):
                await connection.wait_closed()
