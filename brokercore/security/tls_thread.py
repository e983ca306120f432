"""asyncio's SSL protocol, decrypting large reads on a thread beside the event loop.

The broker is one event loop on one thread. Over TLS, decrypting what a client produces
(`SSLObject.read`: OpenSSL's cipher and its copy out of each 16 KiB record) was about half
of what TLS added to a produced byte on the broker, on that thread, and the loop was the
bottleneck of a SASL_SSL producer. CPython's `_ssl` releases the GIL inside `SSL_read`,
memory BIOs included, so the decryption can run on the other core while the loop receives
the next bytes and handles the requests already read.

`ThreadedSSLProtocol` is asyncio's `SSLProtocol` (Python 3.11) with one change: once the
connection is established, when at least `THREAD_BYTES` of ciphertext wait in the incoming
memory BIO and the application's buffer takes as much (a large frame's own buffer,
`brokercore/frame_connection.py`), the reads into that buffer (the loop of asyncio's
`_do_read__buffered`) run as one job on the process's one decryption thread. Smaller reads
(a lone small request, the handshake, a login, a frame's 16 KiB head) are decrypted on the
loop as before, so small requests pay no hand-off; a lone large one pays it once per read
(bench/README.md has the round trips).

While a job runs, the loop thread touches neither the `SSLObject` nor its BIOs (an
OpenSSL `SSL` is for one thread at a time): what the socket delivers meanwhile is held, in
order, and written to the incoming BIO when the job is done (past `HELD_BYTES` the socket's
reading pauses, so the client is held back as before); the application's writes wait in
asyncio's write backlog; a flush or shutdown (the application's close, the peer's EOF) and
a lost connection wait for the job. When it is done, on the loop: the held bytes go to the
BIO, the decrypted ones to the application (`buffer_updated`), the answers written
meanwhile are encrypted and sent, and the next read starts if more waits. So bytes reach the
application in order, one job at a time per connection, and the application's
`pause_reading` stops the next job as it stopped asyncio's next read.

It subclasses private parts of `asyncio.sslproto` (`_sslobj`, `_incoming`,
`_ssl_buffer_view`, `_do_read`, `_do_write`, `_do_flush`, `_do_shutdown`,
`_control_ssl_reading`, the state names), as Python 3.11 has them (pyproject pins 3.11): a
Python upgrade must re-read them; tests/brokercore/security/test_tls_thread.py drives the
protocol through real sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import ssl
import threading
from asyncio import sslproto
from collections.abc import Callable
from typing import Any, cast

# A read of at least this much (4 TLS records' worth, into a buffer as large) is decrypted
# on the thread; below it the hand-off would cost more than it frees the loop.
THREAD_BYTES = 2**16
# Ciphertext held while a job runs, past which the socket's reading pauses.
HELD_BYTES = 2**20

_State = sslproto.SSLProtocolState
# Python 3.11's SSLProtocol, whose private methods typeshed's stub (3.10's) lacks
_Base = cast(Any, sslproto.SSLProtocol)

_Job = tuple["ThreadedSSLProtocol", asyncio.AbstractEventLoop, ssl.SSLObject, memoryview]
_jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
_thread: threading.Thread | None = None
_thread_lock = threading.Lock()


def _submit(job: _Job) -> None:
    global _thread
    if _thread is None:
        with _thread_lock:
            if _thread is None:
                _thread = threading.Thread(target=_decrypt_jobs, name="tls-decrypt",
                                           daemon=True)
                _thread.start()
    _jobs.put(job)


def _decrypt_jobs() -> None:
    """The decryption thread: one job at a time, for every connection of the process."""
    while True:
        protocol, loop, sslobj, buf = _jobs.get()
        error: BaseException | None = None
        offset = count = 0
        try:
            offset, count = _read_into(sslobj, buf)
        except BaseException as exc:  # noqa: BLE001 - the loop fails the connection with it
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop is closed: so is the connection
            loop.call_soon_threadsafe(protocol.job_done, offset, count, error, len(buf))


def _read_into(sslobj: ssl.SSLObject, buf: memoryview) -> tuple[int, int]:
    """On the thread: decrypt into `buf` until it is full or OpenSSL wants more ciphertext.
    Returns the bytes read and the last read's count (0: the peer's close_notify)."""
    wants, offset, count = len(buf), 0, 1
    try:
        while offset < wants:
            # into a buffer read() answers a count (typeshed has bytes only)
            count = sslobj.read(  # type: ignore[assignment]
                wants - offset, buf[offset:] if offset else buf)
            if count <= 0:
                break
            offset += count
    except sslproto.SSLAgainErrors:
        pass
    return offset, count


class ThreadedSSLProtocol(sslproto.SSLProtocol):
    """asyncio's SSL protocol with large reads decrypted on a thread (module docstring)."""

    # Python 3.11's own, which typeshed's stub (written for 3.10's SSLProtocol) lacks
    _state: sslproto.SSLProtocolState
    _sslobj: ssl.SSLObject
    _incoming: ssl.MemoryBIO
    _transport: asyncio.Transport
    _loop: asyncio.AbstractEventLoop
    _ssl_buffer_view: memoryview
    _app_reading_paused: bool
    _ssl_reading_paused: bool
    _write_backlog: Any
    _app_protocol_get_buffer: Callable[[int], memoryview]
    _app_protocol_buffer_updated: Callable[[int], None]
    _call_eof_received: Callable[[], None]
    _start_shutdown: Callable[[], None]
    _process_outgoing: Callable[[], None]
    _fatal_error: Callable[..., None]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._job = False  # a decryption job is out: the SSLObject is the thread's
        self._held: list[bytes] = []  # ciphertext received meanwhile, in order
        self._held_bytes = 0
        self._held_paused = False  # the socket paused because too much was held
        self._lost_during_job: tuple[BaseException | None] | None = None

    def buffer_updated(self, nbytes: int) -> None:
        if not self._job:
            _Base.buffer_updated(self, nbytes)
            return
        self._held.append(bytes(self._ssl_buffer_view[:nbytes]))
        self._held_bytes += nbytes
        if self._held_bytes >= HELD_BYTES and not self._held_paused:
            self._held_paused = True
            self._transport.pause_reading()

    def _do_read(self) -> None:
        if self._job:
            return
        if (self._state == _State.WRAPPED and not self._app_reading_paused
                and self._incoming.pending >= THREAD_BYTES):
            buf = self._app_protocol_get_buffer(self._incoming.pending)
            if len(buf) >= THREAD_BYTES:
                self._job = True
                _submit((self, self._loop, self._sslobj, buf))
                return
        _Base._do_read(self)

    def job_done(self, offset: int, count: int, error: BaseException | None,
                 wants: int) -> None:
        """On the loop: a job's outcome."""
        self._job = False
        if self._lost_during_job is not None:
            (exc,) = self._lost_during_job
            self._lost_during_job = None
            _Base.connection_lost(self, exc)
            return
        if self._state == _State.UNWRAPPED:
            return
        if error is not None:
            self._fatal_error(error, "Fatal error on SSL protocol")
            return
        try:
            self._after_job(offset, count, wants)
        except Exception as ex:  # noqa: BLE001 - as asyncio's _do_read: the connection fails
            self._fatal_error(ex, "Fatal error on SSL protocol")

    def _after_job(self, offset: int, count: int, wants: int) -> None:
        held, self._held, self._held_bytes = self._held, [], 0
        for chunk in held:
            self._incoming.write(chunk)
        if self._held_paused:
            self._held_paused = False
            if not self._ssl_reading_paused:
                self._transport.resume_reading()
        if offset > 0:
            self._app_protocol_buffer_updated(offset)
        if not count:  # close_notify
            self._call_eof_received()
            self._start_shutdown()
        elif self._state == _State.FLUSHING:  # closed, or the peer's EOF, while the job ran
            self._do_flush()
        elif self._state == _State.SHUTDOWN:
            self._do_shutdown()
        else:
            # the answers written meanwhile go out before the next job
            if self._write_backlog:
                self._do_write()
            else:
                self._process_outgoing()
            if offset == wants or held:  # more may wait
                self._do_read()
            else:
                self._control_ssl_reading()

    # While a job runs, everything else that touches the SSLObject or its BIOs waits for it.

    def _do_write(self) -> None:
        if not self._job:
            _Base._do_write(self)

    def _do_flush(self) -> None:
        if not self._job:
            _Base._do_flush(self)

    def _do_shutdown(self) -> None:
        if not self._job:
            _Base._do_shutdown(self)

    def _control_ssl_reading(self) -> None:
        if not self._job:
            _Base._control_ssl_reading(self)

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._job:
            self._lost_during_job = (exc,)
            return
        _Base.connection_lost(self, exc)


async def start_tls(transport: asyncio.BaseTransport, protocol: asyncio.BaseProtocol,
                    context: ssl.SSLContext, *, server_side: bool,
                    handshake_timeout: float) -> asyncio.Transport | None:
    """`loop.start_tls` (Python 3.11's `BaseEventLoop.start_tls`, step for step) with a
    `ThreadedSSLProtocol`."""
    loop = asyncio.get_running_loop()
    if not getattr(transport, "_start_tls_compatible", False):
        raise TypeError(f"transport {transport!r} is not supported by start_tls()")
    assert isinstance(transport, asyncio.Transport)
    waiter = loop.create_future()
    ssl_protocol = ThreadedSSLProtocol(
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
