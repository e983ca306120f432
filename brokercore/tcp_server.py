"""The one way a broker listens on TCP: the Kafka, controller and metrics listeners.

`TcpServer` binds (port 0 picks a free one), gives each connection a task running the
subclass's `handle`, and on `stop` closes the socket and cancels every connection, so a
stopping broker never leaves a half-served peer behind. `handle` deals with its protocol's
errors; whatever escapes it ends only that connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

log = logging.getLogger(__name__)


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
        self._server = await asyncio.start_server(
            self._serve, self.host or None, self.port, **self._server_options
        )
        self.port = self._server.sockets[0].getsockname()[1]
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
        try:
            await self.handle(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # the peer went away, or we are stopping: the connection just closes
        except Exception:
            log.exception("%s: error serving a connection; closing it", type(self).__name__)
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
