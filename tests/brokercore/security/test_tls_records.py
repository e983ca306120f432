"""The Kafka listener's TLS reading (`brokercore/security/tls_records.py`): record ends
found however the stream is cut, and frames read through the real `SSLObject` with no read
that OpenSSL has to refuse, the client certificate and close_notify as before."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brokercore.frame_connection import FrameConnection
from brokercore.security.tls import certificate_principal
from brokercore.security.tls_records import MAX_RECORD_BYTES, RecordTracker
from tests.brokercore.security.certs import TestCA


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("ca"))


def _records(lengths: list[int]) -> bytes:
    return b"".join(bytes([23, 3, 3]) + struct.pack(">H", n) + bytes([n % 251]) * n
                    for n in lengths)


@given(st.lists(st.integers(0, 2**14 + 256), min_size=1, max_size=12),
       st.lists(st.integers(1, 40_000), max_size=30))
def test_record_ends_are_found_however_the_stream_is_cut(lengths: list[int],
                                                         cuts: list[int]) -> None:
    stream = memoryview(_records(lengths))
    tracker, pos = RecordTracker(), 0
    for size in [*cuts, len(stream)]:
        tracker.feed(stream[pos:pos + size])
        pos = min(pos + size, len(stream))
    ends, end = [], 0
    for n in lengths:
        end += 5 + n
        ends.append(end)
    assert list(tracker.ends) == ends
    assert not tracker.oversized


def test_a_whole_record_waits_only_once_all_of_it_arrived() -> None:
    stream = memoryview(_records([100, 200]))
    tracker = RecordTracker()
    tracker.feed(stream[:3])  # not even a header
    assert not tracker.whole_record_waits(unread=3)
    tracker.feed(stream[3:104])  # one byte short of the first record
    assert not tracker.whole_record_waits(unread=104)
    tracker.feed(stream[104:110])
    assert tracker.whole_record_waits(unread=110)
    # the reader took the first record and the start of the second
    assert not tracker.whole_record_waits(unread=2)
    tracker.feed(stream[110:])
    assert tracker.whole_record_waits(unread=len(stream) - 108)
    assert not tracker.whole_record_waits(unread=0)


def test_a_header_claiming_more_than_tls_allows_goes_to_openssl_at_once() -> None:
    tracker = RecordTracker()
    tracker.feed(memoryview(bytes([23, 3, 3]) + struct.pack(">H", MAX_RECORD_BYTES + 1)))
    assert tracker.whole_record_waits(unread=5)


def _contexts(ca: TestCA) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    broker = ca.issue("broker", "localhost", "Millrace")
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(broker.cert, broker.key)
    server.load_verify_locations(ca.ca_file)
    server.verify_mode = ssl.CERT_REQUIRED
    client = ssl.create_default_context(cafile=ca.ca_file)
    alice = ca.issue("alice", "alice", "Example")
    client.load_cert_chain(alice.cert, alice.key)
    return server, client


class _RawTlsClient:
    """A TLS client over a blocking socket that sends its records cut where the test says,
    so that the broker's side sees records split across reads and several in one."""

    def __init__(self, port: int, context: ssl.SSLContext) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = context.wrap_bio(self.incoming, self.outgoing, server_hostname="localhost")
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self.sock.sendall(self.outgoing.read())
                self.incoming.write(self.sock.recv(65536))
        self.sock.sendall(self.outgoing.read())

    def send(self, data: bytes, cut: int) -> None:
        self.tls.write(data)
        records = self.outgoing.read()
        for start in range(0, len(records), cut):
            self.sock.sendall(records[start:start + cut])

    def close_notify(self) -> None:
        with contextlib.suppress(ssl.SSLWantReadError):
            self.tls.unwrap()
        self.sock.sendall(self.outgoing.read())


async def _serve(server: ssl.SSLContext, client: ssl.SSLContext, frames: list[bytes],
                 cut: int) -> tuple[list[bytes], str | None, bool]:
    """What the server read, the principal, and whether the read ended at close_notify."""
    loop = asyncio.get_running_loop()
    accepted: asyncio.Future[FrameConnection] = loop.create_future()
    listening = await loop.create_server(
        lambda: FrameConnection(2**24, accepted.set_result, tls=True), "127.0.0.1", 0)
    port = listening.sockets[0].getsockname()[1]
    connecting = loop.run_in_executor(None, _RawTlsClient, port, client)
    connection = await accepted
    await connection.start_tls(server, 10)
    raw = await connecting
    principal = certificate_principal(connection.get_extra_info("peercert"))
    stream = b"".join(struct.pack(">i", len(f)) + f for f in frames)
    sending = loop.run_in_executor(None, raw.send, stream, cut)
    received = [bytes(await connection.read_frame()) for _ in frames]
    await sending
    await loop.run_in_executor(None, raw.close_notify)
    try:
        await asyncio.wait_for(connection.read_frame(), 10)
        ended = False
    except asyncio.IncompleteReadError:
        ended = True
    connection.close()
    raw.sock.close()
    listening.close()
    return received, principal, ended


@pytest.mark.parametrize("cut", [1, 7, 16_000, 16_406, 40_000, 1_000_000])
def test_frames_cut_anywhere_arrive_whole_without_a_refused_read(
        ca: TestCA, cut: int, monkeypatch: pytest.MonkeyPatch) -> None:
    refused = []
    read = ssl.SSLObject.read

    def counting_read(self: ssl.SSLObject, *args: Any) -> Any:
        try:
            return read(self, *args)
        except ssl.SSLWantReadError:
            refused.append(args)
            raise

    monkeypatch.setattr(ssl.SSLObject, "read", counting_read)
    frames = [bytes([i]) * size for i, size in enumerate([3, 70_000, 16_384, 1, 300_000])]
    received, principal, ended = asyncio.run(_serve(*_contexts(ca), frames, cut))
    assert received == frames
    assert principal == "User:CN=alice,O=Example"
    assert ended
    assert refused == []

