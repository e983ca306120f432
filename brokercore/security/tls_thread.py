"""asyncio's SSL protocol, decrypting large reads on a thread beside the event loop.

The broker is one event loop on one thread. Over TLS, reading and decrypting what a client
produces (the socket's reads into OpenSSL's memory BIO, `SSLObject.read` per TLS record)
was most of what TLS added to a produced byte on the broker, on that thread, and the loop
was the bottleneck of a SASL_SSL producer. CPython's `_ssl` releases the GIL inside
`SSL_read`, memory BIOs included, so the reading and decryption can run on the other core
while the loop handles the requests already read.

`ThreadedSSLProtocol` is asyncio's `SSLProtocol` (Python 3.11) with one change: once the
connection is established, when the application's buffer takes at least `THREAD_BYTES` (a
large frame's own buffer, `brokercore/frame_connection.py`) and as much ciphertext waits in
the incoming memory BIO, filling that buffer is one job on the process's one decryption
thread. The thread decrypts what the BIO holds and then reads the socket itself (a duplicate
of its descriptor, non-blocking) into the BIO whenever OpenSSL wants more, until the buffer
is full or the socket has nothing more for now. So the rest of a large produce request
costs the loop nothing: not the socket's reads, not the copies into the BIO, not one
`SSL_read` per TLS record (librdkafka's produce requests arrive in records of 2 KiB and
less more often than 16 KiB ones: about 50,000 per 100 MB). Until that much ciphertext has
come, a large buffer waits for it; smaller reads (a lone small request, the handshake, a
login, a frame's 16 KiB head) are decrypted on the loop as before, so small requests pay
no hand-off.

While a job runs, the loop thread touches neither the socket's reading nor the `SSLObject`
and its BIOs (an OpenSSL `SSL` is for one thread at a time): the job pauses the socket
transport's reading (which also cancels a read already due in that turn of the loop) and
resumes it when done; the application's writes wait in asyncio's write backlog; a flush or
shutdown (the application's close, the peer's EOF) and a lost connection wait for the job.
The socket's end is left to the loop's own next read, so asyncio reports it as it always
has; an error reading it fails the connection as asyncio's own read would. When the job is
done, on the loop: the decrypted bytes go to the application (`buffer_updated`), the
answers written meanwhile are encrypted and sent, and the next read starts. So bytes
reach the application in order, one job at a time per connection, and the application's
`pause_reading` stops the next job as it stopped asyncio's next read.

It subclasses private parts of `asyncio.sslproto` (`_sslobj`, `_incoming`, `_do_read`,
`_do_write`, `_do_flush`, `_do_shutdown`, `_control_ssl_reading`, the state names) and
calls `ssl.SSLObject`'s C object (`_sslobj.read`), as Python 3.11 has them (pyproject pins
3.11): a Python upgrade must re-read them; tests/brokercore/security/test_tls_thread.py
drives the protocol through real sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import ssl
import threading
from asyncio import sslproto
from collections.abc import Callable
from typing import Any, cast

# A read of at least this much (4 TLS records' worth, into a buffer as large) is decrypted
# on the thread; below it the hand-off would cost more than it frees the loop.
THREAD_BYTES = 2**16
# The thread's own socket reads, into one buffer of its own.
RECV_BYTES = 2**18

_State = sslproto.SSLProtocolState
# Python 3.11's SSLProtocol, whose private methods typeshed's stub (3.10's) lacks
_Base = cast(Any, sslproto.SSLProtocol)

_Job = tuple["ThreadedSSLProtocol", asyncio.AbstractEventLoop, ssl.SSLObject, ssl.MemoryBIO,
             int, memoryview]
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
    chunk = memoryview(bytearray(RECV_BYTES))
    while True:
        protocol, loop, sslobj, incoming, fd, buf = _jobs.get()
        error: BaseException | None = None
        offset = count = 0
        try:
            offset, count = _read_into(sslobj, incoming, fd, buf, chunk)
        except BaseException as exc:  # noqa: BLE001 - the loop fails the connection with it
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop is closed: so is the connection
            loop.call_soon_threadsafe(protocol.job_done, offset, count, error)


def _read_into(sslobj: ssl.SSLObject, incoming: ssl.MemoryBIO, fd: int, buf: memoryview,
               chunk: memoryview) -> tuple[int, int]:
    """On the thread: decrypt into `buf` until it is full, reading the socket (`fd`, a
    duplicate of the connection's non-blocking one) whenever OpenSSL wants more ciphertext,
    until the socket has no more for now. Returns the bytes read and the last read's count
    (0: the peer's close_notify). The socket's end is left for the loop's own read to meet;
    its errors are raised (the loop fails the connection with them)."""
    # the C object's read: `SSLObject.read` is a Python call around it, paid per TLS record
    # (librdkafka's produce requests come in records of about 2 KiB: 50,000 per 100 MB)
    read = sslobj._sslobj.read  # type: ignore[attr-defined]
    wants, offset, count = len(buf), 0, 1
    while offset < wants:
        try:
            count = read(wants - offset, buf[offset:] if offset else buf)
        except ssl.SSLWantReadError:
            try:
                got = os.readv(fd, [chunk])
            except (BlockingIOError, InterruptedError):
                break
            if not got:
                break
            incoming.write(chunk[:got])
            continue
        except ssl.SSLWantWriteError:
            break
        if count <= 0:
            break
        offset += count
    return offset, count


class ThreadedSSLProtocol(sslproto.SSLProtocol):
    """asyncio's SSL protocol with large reads decrypted on a thread (module docstring)."""

    # Python 3.11's own, which typeshed's stub (written for 3.10's SSLProtocol) lacks
    _state: sslproto.SSLProtocolState
    _sslobj: ssl.SSLObject
    _incoming: ssl.MemoryBIO
    _transport: asyncio.Transport
    _loop: asyncio.AbstractEventLoop
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
        self._job = False  # a decryption job is out: the SSLObject and the socket are the thread's
        self._job_paused = False  # the job paused the socket's reading on the loop
        self._fd = -1  # the thread's duplicate of the socket, from the first job on
        self._lost_during_job: tuple[BaseException | None] | None = None

    def buffer_updated(self, nbytes: int) -> None:
        if self._job:  # the socket's reading is paused while the thread reads it
            self._fatal_error(RuntimeError("TLS bytes read on the loop during a job"),
                              "Fatal error on SSL protocol")
            return
        _Base.buffer_updated(self, nbytes)

    def _do_read(self) -> None:
        if self._job:
            return
        if self._state == _State.WRAPPED and not self._app_reading_paused:
            buf = self._app_protocol_get_buffer(self._incoming.pending)
            if len(buf) >= THREAD_BYTES:
                if self._incoming.pending >= THREAD_BYTES:
                    self._start_job(buf)
                else:  # the rest of a large frame: the thread reads it once some has come
                    self._control_ssl_reading()
                return
        _Base._do_read(self)

    def _start_job(self, buf: memoryview) -> None:
        self._job = True
        if self._transport.is_reading():
            # cancels a read already due in this turn of the loop, too
            self._transport.pause_reading()
            self._job_paused = True
        if self._fd < 0:
            self._fd = os.dup(self._transport.get_extra_info("socket").fileno())
        _submit((self, self._loop, self._sslobj, self._incoming, self._fd, buf))

    def job_done(self, offset: int, count: int, error: BaseException | None) -> None:
        """On the loop: a job's outcome."""
        self._job = False
        if self._job_paused:
            self._job_paused = False
            if not self._ssl_reading_paused:
                self._transport.resume_reading()
        if self._lost_during_job is not None:
            (exc,) = self._lost_during_job
            self._lost_during_job = None
            self.connection_lost(exc)
            return
        if self._state == _State.UNWRAPPED:
            return
        if error is not None:
            self._fatal_error(error, "Fatal error on SSL protocol")
            return
        try:
            self._after_job(offset, count)
        except Exception as ex:  # noqa: BLE001 - as asyncio's _do_read: the connection fails
            self._fatal_error(ex, "Fatal error on SSL protocol")

    def _after_job(self, offset: int, count: int) -> None:
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
            self._do_read()  # the frame's rest, or the next frames, may be in the BIO

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
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
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
