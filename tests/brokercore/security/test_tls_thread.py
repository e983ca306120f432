"""The Kafka listener's TLS with large reads decrypted on a thread
(`brokercore/security/tls_thread.py`), over real TLS sockets on 127.0.0.1: frames of every
size arrive whole and in order while answers are written (the thread reading the socket
itself), a reader that stops taking frames gets them all later, and both ends may close
while the thread decrypts."""

from __future__ import annotations

import asyncio
import os
import ssl
import threading

import pytest

from brokercore.config import BrokerConfig
from brokercore.frame_connection import FrameConnection
from brokercore.security.tls import server_context
from brokercore.security.tls_thread import THREAD_BYTES
from tests.brokercore.security.certs import TestCA

SIZES = [0, 1, 7, 100, 16_379, 16_384, 16_385, THREAD_BYTES - 1, THREAD_BYTES, 300_000,
         1_048_576, 3, 2_000_000, 5, 5_000_000, 9]


@pytest.fixture(scope="module")
def contexts(tmp_path_factory: pytest.TempPathFactory) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    ca = TestCA(tmp_path_factory.mktemp("ca"))
    broker = ca.issue("broker", "localhost", "Millrace")
    server = server_context(BrokerConfig({"ssl.keystore.type": "PEM",
                                          "ssl.keystore.location": str(ca.keystore_pem(broker))}),
                            "SSL")
    return server, ssl.create_default_context(cafile=ca.ca_file)


async def _serve(server_ctx: ssl.SSLContext,
                 serve: object) -> tuple[asyncio.Server, int]:
    loop = asyncio.get_running_loop()
    tasks: set[asyncio.Task[None]] = set()

    def connected(connection: FrameConnection) -> None:
        async def run() -> None:
            await connection.start_tls(server_ctx, 10)
            await serve(connection)  # type: ignore[operator]
        tasks.add(loop.create_task(run()))

    server = await loop.create_server(
        lambda: FrameConnection(2**23, connected, tls=True), "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def _frames(seed: int) -> list[bytes]:
    return [os.urandom(size) if size < 64 else bytes([seed + i & 255]) * size
            + os.urandom(16) for i, size in enumerate(SIZES)]


async def _echo_lengths(contexts: tuple[ssl.SSLContext, ssl.SSLContext], frames: list[bytes],
                        hold: bool) -> list[bytes]:
    """Each frame as the server read it; the server answers each one with its length, and
    with `hold` takes no frame until the client has sent them all."""
    got: list[bytes] = []
    sent = asyncio.Event()

    async def serve(connection: FrameConnection) -> None:
        if hold:
            await sent.wait()
        try:
            while True:
                frame = await connection.read_frame()
                got.append(bytes(frame))
                connection.write(len(frame).to_bytes(4, "big"))
                await connection.drain()
        except asyncio.IncompleteReadError:
            connection.close()

    server, port = await _serve(contexts[0], serve)
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=contexts[1],
                                                  server_hostname="localhost")
    for frame in frames:
        writer.write(len(frame).to_bytes(4, "big") + frame)
    if hold:
        await asyncio.sleep(0.5)  # the server's connection pauses its reading meanwhile
        sent.set()
    await writer.drain()
    answers = [int.from_bytes(await reader.readexactly(4), "big") for _ in frames]
    assert answers == [len(f) for f in frames]
    writer.close()
    await writer.wait_closed()
    server.close()
    return got


def test_frames_of_every_size_arrive_whole_and_in_order(
        contexts: tuple[ssl.SSLContext, ssl.SSLContext]) -> None:
    frames = _frames(1) + _frames(2)
    descriptors = len(os.listdir("/proc/self/fd"))
    assert asyncio.run(_echo_lengths(contexts, frames, hold=False)) == frames
    assert any(t.name.startswith("tls-decrypt") for t in threading.enumerate())
    # the thread reads the socket through a duplicate, closed with the connection
    assert len(os.listdir("/proc/self/fd")) == descriptors


def test_a_reader_that_stops_taking_frames_gets_them_all_later(
        contexts: tuple[ssl.SSLContext, ssl.SSLContext]) -> None:
    frames = _frames(3) * 4  # 14 MB: more than the connection buffers before pausing
    assert asyncio.run(_echo_lengths(contexts, frames, hold=True)) == frames


async def _closed_mid_stream(contexts: tuple[ssl.SSLContext, ssl.SSLContext],
                             by_server: bool) -> BaseException | None:
    """The server reads one frame of a large stream, then it closes (or the client aborts);
    what the server's next read raised."""
    ended: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()

    async def serve(connection: FrameConnection) -> None:
        await connection.read_frame()
        if by_server:
            connection.close()
        try:
            while True:
                await connection.read_frame()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError) as exc:
            ended.set_result(exc)
        await connection.wait_closed()

    server, port = await _serve(contexts[0], serve)
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=contexts[1],
                                              server_hostname="localhost")
    frame = os.urandom(1_000_000)
    for _ in range(20):
        writer.write(len(frame).to_bytes(4, "big") + frame)
    if not by_server:
        await asyncio.sleep(0.05)
        writer.transport.abort()
    result = await asyncio.wait_for(ended, 10)
    writer.close()
    server.close()
    return result


@pytest.mark.parametrize("by_server", [True, False], ids=["server-closes", "client-aborts"])
def test_a_connection_closed_while_the_thread_decrypts_ends_its_reading(
        contexts: tuple[ssl.SSLContext, ssl.SSLContext], by_server: bool) -> None:
    assert asyncio.run(_closed_mid_stream(contexts, by_server)) is not None

