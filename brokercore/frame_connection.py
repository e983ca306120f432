"""One connection of the Kafka listener as an `asyncio.BufferedProtocol`: size-prefixed
frames (Kafka's int32 length, then the request) read straight into buffers of their own.

Why not `asyncio.StreamReader`: every byte a client sent was copied three or four times
before a handler saw it. The transport received into a new `bytes` (over TLS, asyncio's
SSL protocol decrypted into 256 KiB `bytes` and joined them), the stream reader appended it
to its buffer, `readexactly` copied the frame out and deleted it from the buffer's front (a
`memmove` of whatever followed). A `BufferedProtocol` says where the bytes go: the plain
socket transport `recv_into`s the buffer `get_buffer` returns, and asyncio's SSL protocol
decrypts into it (`SSLObject.read(n, buffer)`; for large reads on a thread of its own,
`security/tls_thread.py`), so a produce request's record batches are written once, by the
kernel or by OpenSSL, into the memory the handlers read. Between `get_buffer` and
`buffer_updated` nothing here touches the buffer handed out, which is what lets that
thread fill it while the loop runs.

How a frame is read: while none is started, bytes go into a 16 KiB head buffer, where the
sizes are read and small frames are copied out whole (a few requests in one `recv`). Once a
frame does not fit in what has arrived, it gets a `bytearray` of exactly its size, the part
already read is copied in, and the rest is read straight into it. A frame's buffer is never
reused, so handlers may keep `memoryview` slices of it and patch them in place (the log
stamps offsets into a produce request's own batches).

A frame over `EAGER_BYTES` (4 MiB; Kafka's `socket.request.max.bytes` is 100 MiB) is the
exception: it grows as its bytes arrive, read through a 1 MiB chunk and appended, so a
client that declares a huge size and sends nothing holds no more memory than it sent. Such
frames are rare (librdkafka's `message.max.bytes` is 1 MB), and they pay one copy.

A size outside `0..max_frame_bytes` stops the reading: `read_frame` raises `BadFrameSize`
once the frames before it have been read, and the server closes the connection as before.
Reading pauses while more than `MAX_BUFFERED` bytes of whole frames wait for `read_frame`
(the server stops reading at its in-flight limit). Writing is `StreamWriter`'s: `drain`
waits while the transport's buffer is over its high-water mark.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
import struct
from collections.abc import Callable
from typing import Any

from brokercore.security.tls_thread import start_tls

HEAD_BYTES = 2**14
MAX_BUFFERED = 2**21  # bytes of whole frames not yet taken: then reading pauses
EAGER_BYTES = 2**22  # frames up to this size get their whole buffer at once
LARGE_CHUNK = 2**20  # a larger frame's bytes are read through a chunk of this size
_SIZE = struct.Struct(">i")


class BadFrameSize(Exception):
    """A frame's size prefix is negative or over the connection's limit."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


class FrameConnection(asyncio.BufferedProtocol):
    def __init__(self, max_frame_bytes: int, on_connected: Callable[[FrameConnection], None],
                 *, tls: bool = False) -> None:
        self._max_frame_bytes = max_frame_bytes
        self._on_connected = on_connected
        self._tls = tls  # the listener's: a handshake (start_tls) comes before any frame
        self._over_tls = False
        self._transport: asyncio.Transport | None = None
        self._head = bytearray(HEAD_BYTES)
        self._head_view = memoryview(self._head)
        self._head_filled = 0
        self._body: memoryview | None = None  # the frame being read, once its size is known
        self._body_filled = 0
        self._large: bytearray | None = None  # a frame over EAGER_BYTES, as it grows
        self._large_size = 0
        self._chunk: memoryview | None = None
        self._frames: collections.deque[memoryview | BadFrameSize] = collections.deque()
        self._buffered = 0
        self._end: BaseException | None = None  # what read_frame raises once frames run out
        self._failed = False  # a bad size was read: nothing after it is
        self._reading_paused = False
        self._frame_waiter: asyncio.Future[None] | None = None
        self._writing_paused = False
        self._drain_waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._lost = False
        self._closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    @property
    def transport(self) -> asyncio.Transport:
        assert self._transport is not None
        return self._transport

    # asyncio's side

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        if self._tls:
            # Not a byte is read before start_tls hands the socket to the SSL protocol
            # (start_tls resumes the reading); the client hello must reach OpenSSL.
            transport.pause_reading()
        self._on_connected(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._large is not None:
            if self._chunk is None:
                self._chunk = memoryview(bytearray(LARGE_CHUNK))
            return self._chunk[:self._large_size - len(self._large)]
        if self._body is not None:
            return self._body[self._body_filled:]
        return self._head_view[self._head_filled:]

    def buffer_updated(self, nbytes: int) -> None:
        if self._failed:
            return
        if self._large is not None:
            assert self._chunk is not None
            self._large += self._chunk[:nbytes]
            if len(self._large) == self._large_size:
                self._push(memoryview(self._large))
                self._large = self._chunk = None
        elif self._body is None:
            self._head_filled += nbytes
            self._split_head()
        else:
            self._body_filled += nbytes
            if self._body_filled == len(self._body):
                frame, self._body = self._body, None
                self._push(frame)
        if self._buffered > MAX_BUFFERED and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
        self._wake_reader()

    def eof_received(self) -> bool:
        if self._end is None:
            self._end = asyncio.IncompleteReadError(b"", None)
        self._wake_reader()
        # Half-closed, the connection still writes the answers; over TLS asyncio closes
        # anyway (and warns if asked to keep it open).
        return not self._over_tls

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        if exc is not None:
            self._end, self._frames = exc, collections.deque()
        elif self._end is None:
            self._end = asyncio.IncompleteReadError(b"", None)
        self._wake_reader()
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_exception(exc or ConnectionResetError("Connection lost"))
        if not self._closed.done():
            self._closed.set_result(None)

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_result(None)

    # The server's side

    async def read_frame(self) -> memoryview:
        """The next whole frame, without its size prefix. Raises `BadFrameSize`, or
        `asyncio.IncompleteReadError` at the end of the stream (or the connection's error)."""
        while not self._frames:
            if self._end is not None:
                raise self._end
            self._frame_waiter = asyncio.get_running_loop().create_future()
            try:
                await self._frame_waiter
            finally:
                self._frame_waiter = None
        frame = self._frames.popleft()
        if isinstance(frame, BadFrameSize):
            raise frame
        self._buffered -= len(frame)
        if self._reading_paused and self._end is None and self._buffered <= MAX_BUFFERED // 2:
            self._reading_paused = False
            self.transport.resume_reading()
        return frame

    async def start_tls(self, context: ssl.SSLContext, handshake_timeout: float) -> None:
        """The server side of the TLS handshake; from then on frames are decrypted into
        their buffers (large reads on the decryption thread, `security/tls_thread.py`)."""
        transport = await start_tls(self.transport, self, context, server_side=True,
                                    handshake_timeout=handshake_timeout)
        if transport is None:  # closed during the handshake
            raise ConnectionResetError("the connection closed during the TLS handshake")
        self._transport, self._over_tls = transport, True

    def end_reading(self) -> None:
        """Read no more: the frames already received are still handed out by `read_frame`,
        then it ends as at the client's EOF (a stopping broker answers what it received).
        A connection still in its TLS handshake has received no request: it just closes."""
        if self._tls and not self._over_tls:
            self.close()
            return
        if self._transport is not None and not self._lost and not self._reading_paused:
            self._reading_paused = True
            self._transport.pause_reading()
        if self._end is None:
            self._end = asyncio.IncompleteReadError(b"", None)
        self._wake_reader()

    def write(self, data: bytes | memoryview) -> None:
        self.transport.write(data)

    async def drain(self) -> None:
        """Wait while the transport's write buffer is over its high-water mark."""
        if self._lost:
            raise ConnectionResetError("Connection lost")
        if self.transport.is_closing():
            await asyncio.sleep(0)  # let connection_lost run, as StreamWriter.drain does
            if self._lost:
                raise ConnectionResetError("Connection lost")
        if not self._writing_paused:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._drain_waiters.append(waiter)
        try:
            await waiter
        finally:
            self._drain_waiters.remove(waiter)

    def write_buffer_size(self) -> int:
        return self.transport.get_write_buffer_size()

    def get_extra_info(self, name: str) -> Any:
        return self.transport.get_extra_info(name)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    async def wait_closed(self) -> None:
        await asyncio.shield(self._closed)

    # Framing

    def _split_head(self) -> None:
        """Take the whole frames out of the head buffer; start the body of one that is not
        all there; keep the bytes of a size prefix not all there."""
        head, end, pos = self._head_view, self._head_filled, 0
        while end - pos >= _SIZE.size:
            (size,) = _SIZE.unpack_from(head, pos)
            if not 0 <= size <= self._max_frame_bytes:
                self._failed = True
                self._frames.append(BadFrameSize(size))
                self._head_filled = 0
                self.transport.pause_reading()
                return
            start = pos + _SIZE.size
            pos = start + size
            if pos > end and size > EAGER_BYTES:
                self._large, self._large_size, pos = bytearray(head[start:end]), size, end
                break
            if pos > end:
                body = memoryview(bytearray(size))
                body[:end - start] = head[start:end]
                self._body, self._body_filled, pos = body, end - start, end
                break
            self._push(memoryview(bytearray(head[start:pos])))
        rest = end - pos
        if rest:
            head[:rest] = head[pos:end]
        self._head_filled = rest

    def _push(self, frame: memoryview) -> None:
        self._frames.append(frame)
        self._buffered += len(frame)

    def _wake_reader(self) -> None:
        if self._frame_waiter is not None and not self._frame_waiter.done():
            self._frame_waiter.set_result(None)
