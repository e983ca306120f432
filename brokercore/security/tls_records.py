"""asyncio's SSL protocol, asking OpenSSL for plaintext only when a whole TLS record waits.

asyncio's `SSLProtocol` reads the application's bytes by calling `SSLObject.read` until it
raises `SSLWantReadError`. OpenSSL hands over one record (at most 16 KiB of plaintext) per
call, and librdkafka sends each record of a produce request with its own `send`, so the
broker wakes about once per record and every wake-up ends in that exception: creating it
(`_ssl.c` fills in the library, reason and message) cost 15 µs against 35 µs for the
successful read of the 16 KiB record itself, on these cores under load
(bench/README.md, "Issue 20, third step").

`RecordSSLProtocol` follows the TLS record headers (5 bytes: type, version, a 16-bit
length) in the bytes the socket delivers, so it knows where each record ends, and calls
`SSLObject.read` only while OpenSSL holds decrypted bytes (`pending()`) or a record it has
not finished is all in the incoming memory BIO. Everything else is asyncio's, unchanged:
the handshake, close_notify and shutdown, flow control both ways, alerts, renegotiation
(a record like any other, so OpenSSL sees it at once), the peer certificate. A record
whose header claims more than TLS allows is handed to OpenSSL at once, which refuses it
as before (`record_overflow`); a connection is never left waiting on a length we misread.

It subclasses private parts of `asyncio.sslproto` (Python 3.11, which pyproject pins):
`_incoming`, `_sslobj` and `_do_read__buffered`. A Python upgrade must re-read them;
tests/brokercore/security/test_tls_records.py drives the protocol through the real
`SSLObject` and fails if they change shape.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
from asyncio import sslproto
from collections.abc import Callable
from typing import Any

HEADER_BYTES = 5
# TLS 1.2's largest ciphertext (RFC 5246 6.2.3); TLS 1.3's is 2^14 + 256
MAX_RECORD_BYTES = 2**14 + 2048


class RecordTracker:
    """Where the TLS records of one direction of a stream end (stream positions), read from
    their headers as the bytes arrive, in pieces of any size."""

    def __init__(self) -> None:
        self.received = 0  # bytes of the stream seen so far
        self.ends: collections.deque[int] = collections.deque()  # not yet known consumed
        self.oversized = False  # a header claimed more than TLS allows
        self._next = 0  # stream position of the next header
        self._partial = b""  # the first bytes of a header split between pieces

    def feed(self, data: memoryview) -> None:
        start = self.received
        self.received = end = start + len(data)
        pos = self._next
        if self._partial:
            header = self._partial + bytes(data[:HEADER_BYTES - len(self._partial)])
            if len(header) < HEADER_BYTES:
                self._partial = header
                return
            self._partial = b""
            pos = self._record(pos, header[3] << 8 | header[4])
        while pos + HEADER_BYTES <= end:
            i = pos - start
            pos = self._record(pos, data[i + 3] << 8 | data[i + 4])
        if pos < end:
            self._partial = bytes(data[pos - start:])
        self._next = pos

    def _record(self, pos: int, length: int) -> int:
        if length > MAX_RECORD_BYTES:
            self.oversized = True
        pos += HEADER_BYTES + length
        self.ends.append(pos)
        return pos

    def whole_record_waits(self, unread: int) -> bool:
        """Whether the record the reader is in (or starts next) has fully arrived, given
        `unread` of the received bytes still waiting for the reader."""
        consumed = self.received - unread
        ends = self.ends
        while ends and ends[0] <= consumed:
            ends.popleft()
        return self.oversized or (bool(ends) and ends[0] <= self.received)


class RecordSSLProtocol(sslproto.SSLProtocol):
    """asyncio's SSL protocol, reading the application's bytes only when OpenSSL has some
    to give (see the module's docstring)."""

    # Python 3.11's own, which typeshed's stub (written for 3.10's SSLProtocol) lacks
    _ssl_buffer_view: memoryview
    _sslobj: ssl.SSLObject
    _incoming: ssl.MemoryBIO
    _app_protocol_get_buffer: Callable[[int], memoryview]
    _app_protocol_buffer_updated: Callable[[int], None]
    _get_read_buffer_size: Callable[[], int]
    _do_read: Callable[[], None]
    _call_eof_received: Callable[[], None]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._records = RecordTracker()

    def buffer_updated(self, nbytes: int) -> None:
        self._records.feed(self._ssl_buffer_view[:nbytes])
        super().buffer_updated(nbytes)

    def _do_read__buffered(self) -> None:
        # asyncio's loop, with the record check before each read instead of the exception
        # after it (which still ends it after a record that yields no plaintext)
        if not self._readable():
            return
        buf = self._app_protocol_get_buffer(self._get_read_buffer_size())
        wants, offset, count = len(buf), 0, 1
        try:
            while offset < wants and (offset == 0 or self._readable()):
                # into a buffer read() answers a count (typeshed has bytes only)
                count = self._sslobj.read(  # type: ignore[assignment]
                    wants - offset, buf[offset:] if offset else buf)
                if count <= 0:
                    break
                offset += count
            if offset == wants:  # the application's buffer is full: more may wait
                self._loop.call_soon(self._do_read)
        except sslproto.SSLAgainErrors:
            pass
        if offset > 0:
            self._app_protocol_buffer_updated(offset)
        if not count:  # close_notify
            self._call_eof_received()
            self._start_shutdown()

    def _readable(self) -> bool:
        return bool(self._sslobj.pending()) or self._records.whole_record_waits(
            self._incoming.pending)


async def start_tls(transport: asyncio.BaseTransport, protocol: asyncio.BaseProtocol,
                    context: ssl.SSLContext, *, server_side: bool,
                    handshake_timeout: float) -> asyncio.Transport | None:
    """`loop.start_tls` (Python 3.11's `BaseEventLoop.start_tls`, step for step) with a
    `RecordSSLProtocol`."""
    loop = asyncio.get_running_loop()
    if not getattr(transport, "_start_tls_compatible", False):
        raise TypeError(f"transport {transport!r} is not supported by start_tls()")
    assert isinstance(transport, asyncio.Transport)
    waiter = loop.create_future()
    ssl_protocol = RecordSSLProtocol(
        loop, protocol, context, waiter, server_side, None,
        ssl_handshake_timeout=handshake_timeout, call_connection_made=False)
    # Paused until connection_made, so that no byte reaches the SSL protocol before it.
    transport.pause_reading()
    transport.set_protocol(ssl_protocol)
    made = loop.call_soon(ssl_protocol.connection_made, transport)
    resumed = loop.call_soon(transport.resume_reading)
    try:
        await waiter
    except BaseException:
        transport.close()
        made.cancel()
        resumed.cancel()
        raise
    app_transport: asyncio.Transport | None = ssl_protocol._app_transport
    return app_transport
