"""HubChannelLayer: a Channels layer shared by every process of one platform, with no server.

The in-memory layer is per process, but the collector and every web worker must share one
layer (README.md, "The channel layer"). Without REDIS_URL the platform uses this one: the
first process that needs the layer binds a Linux abstract Unix socket named after the data
directory and becomes the hub; every process (the hub's own included) connects to it as a
client. The kernel frees an abstract name when its owner dies, so there is no stale socket
file and no lock: when the hub's process exits, the clients reconnect, one of them wins the
bind and becomes the new hub, and each re-registers its groups and listened channels.
Messages in flight during that takeover are lost, which a channel layer may do (at most once).

Frames: a 4-byte big-endian length, then a msgpack map. Client to hub:
    {"op": "hello", "prefix": P}            P: this process's specific-channel prefix
    {"op": "add"|"discard", "g": G, "c": C} group membership
    {"op": "send", "c": C, "m": M}          to one channel
    {"op": "group_send", "g": G, "m": M}
    {"op": "listen", "c": C}                this process receives normal channel C
    {"op": "occupied", "id": N, "gs": [G, ...]}  which of these groups have a member?
Hub to client:
    {"op": "deliver", "cs": [C, ...], "m": M}   one frame per process per message
    {"op": "occupied", "id": N, "gs": [G, ...]}  the answer: the groups with a member

`occupied` lets a publisher skip rendering what no browser has open (controlcenter/events.py):
the hub owns every group's members, so it is the one place that knows.

Every public method runs on the process's one I/O thread (its own event loop), so the layer
works from Daphne's loop, from `async_to_sync` in a management command, and from tests, with
one connection per process.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import itertools
import logging
import os
import secrets
import struct
import threading
import time
from collections import defaultdict, deque
from collections.abc import Coroutine
from typing import Any, TypeVar

import msgpack
from channels.exceptions import ChannelFull
from channels.layers import BaseChannelLayer

log = logging.getLogger(__name__)
T = TypeVar("T")
HEADER = struct.Struct(">I")
MAX_FRAME = 64 * 1024 * 1024
OCCUPIED_TIMEOUT = 2.0  # seconds for the hub's answer to `occupied`


async def read_frame(reader: asyncio.StreamReader) -> dict[str, Any]:
    (size,) = HEADER.unpack(await reader.readexactly(HEADER.size))
    if size > MAX_FRAME:
        raise ValueError(f"frame of {size} bytes exceeds {MAX_FRAME}")
    frame: dict[str, Any] = msgpack.unpackb(await reader.readexactly(size), raw=False)
    return frame


def encode_frame(frame: dict[str, Any]) -> bytes:
    body: bytes = msgpack.packb(frame, use_bin_type=True)
    return HEADER.pack(len(body)) + body


def socket_name(data_dir: str, name: str = "") -> str:
    """The abstract socket address of a data directory's hub ('\\0' + a short name)."""
    digest = hashlib.sha256(f"{os.path.realpath(data_dir)}|{name}".encode()).hexdigest()[:24]
    return f"\0millrace-channels-{digest}"


class Hub:
    """Routes messages between the processes connected to it; owns every group's members."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.clients: dict[str, asyncio.StreamWriter] = {}  # prefix -> connection
        self.groups: defaultdict[str, set[str]] = defaultdict(set)
        self.listeners: defaultdict[str, deque[str]] = defaultdict(deque)  # channel -> prefixes
        self.backlog: defaultdict[str, deque[Any]] = defaultdict(deque)  # nobody listens yet

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        prefix = ""
        try:
            hello = await read_frame(reader)
            prefix = str(hello["prefix"])
            self.clients[prefix] = writer
            while True:
                self.apply(prefix, await read_frame(reader))
        except (asyncio.IncompleteReadError, ConnectionError, ValueError, KeyError):
            pass
        finally:
            self.forget(prefix, writer)
            writer.close()

    def apply(self, prefix: str, frame: dict[str, Any]) -> None:
        op = frame["op"]
        if op == "add":
            self.groups[frame["g"]].add(frame["c"])
        elif op == "discard":
            self.groups[frame["g"]].discard(frame["c"])
        elif op == "send":
            self.send(frame["c"], frame["m"])
        elif op == "group_send":
            self.group_send(frame["g"], frame["m"])
        elif op == "listen":
            self.listen(prefix, frame["c"])
        elif op == "occupied":
            found = [g for g in frame["gs"] if self.groups.get(g)]
            self.reply(prefix, {"op": "occupied", "id": frame["id"], "gs": found})

    def send(self, channel: str, message: Any) -> None:
        if "!" in channel:
            self.deliver(channel.split("!", 1)[0], [channel], message)
            return
        listeners = self.listeners.get(channel)
        if not listeners:
            backlog = self.backlog[channel]
            if len(backlog) < self.capacity:
                backlog.append(message)
            return
        listeners.rotate(-1)  # round robin between the processes that receive it
        self.deliver(listeners[0], [channel], message)

    def group_send(self, group: str, message: Any) -> None:
        by_process: defaultdict[str, list[str]] = defaultdict(list)
        for channel in self.groups.get(group, ()):
            if "!" in channel:
                by_process[channel.split("!", 1)[0]].append(channel)
            else:
                self.send(channel, message)
        for prefix, channels in by_process.items():
            self.deliver(prefix, channels, message)

    def listen(self, prefix: str, channel: str) -> None:
        if prefix not in self.listeners[channel]:
            self.listeners[channel].append(prefix)
        for message in self.backlog.pop(channel, ()):
            self.deliver(prefix, [channel], message)

    def deliver(self, prefix: str, channels: list[str], message: Any) -> None:
        self.reply(prefix, {"op": "deliver", "cs": channels, "m": message})

    def reply(self, prefix: str, frame: dict[str, Any]) -> None:
        writer = self.clients.get(prefix)
        if writer is not None and not writer.is_closing():
            writer.write(encode_frame(frame))

    def forget(self, prefix: str, writer: asyncio.StreamWriter) -> None:
        if self.clients.get(prefix) is not writer:
            return
        del self.clients[prefix]
        mark = prefix + "!"
        for members in self.groups.values():
            members.difference_update([c for c in members if c.startswith(mark)])
        for listeners in self.listeners.values():
            with contextlib.suppress(ValueError):
                listeners.remove(prefix)


class HubChannelLayer(BaseChannelLayer):  # type: ignore[misc]  # channels is untyped
    """The channel layer of the embedded platform (see the module docstring)."""

    extensions = ["groups", "flush"]

    def __init__(self, data_dir: str, name: str = "", expiry: int = 60, capacity: int = 100,
                 channel_capacity: dict[str, int] | None = None, **kwargs: Any) -> None:
        super().__init__(expiry=expiry, capacity=capacity, channel_capacity=channel_capacity,
                         **kwargs)
        self.channel_capacity: list[Any] = self.compile_capacities(channel_capacity or {})
        self.address = socket_name(data_dir, name)
        self._pid = -1
        self._lock = threading.Lock()

    # --- the Channels layer API ----------------------------------------------------------

    async def new_channel(self, prefix: str = "specific") -> str:
        return f"{self._io().prefix}!{prefix}.{secrets.token_hex(8)}"

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        self.require_valid_channel_name(channel)
        await self._call(self._io().send({"op": "send", "c": channel, "m": message}))

    async def receive(self, channel: str) -> dict[str, Any]:
        self.require_valid_channel_name(channel)
        io = self._io()
        return await self._call(io.receive(channel, self.get_capacity(channel), self.expiry))

    async def group_add(self, group: str, channel: str) -> None:
        self.require_valid_group_name(group)
        self.require_valid_channel_name(channel)
        await self._call(self._io().membership("add", group, channel))

    async def group_discard(self, group: str, channel: str) -> None:
        self.require_valid_group_name(group)
        self.require_valid_channel_name(channel)
        await self._call(self._io().membership("discard", group, channel))

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        self.require_valid_group_name(group)
        await self._call(self._io().send({"op": "group_send", "g": group, "m": message}))

    async def flush(self) -> None:
        """Drop this process's queued messages and memberships (tests call it between runs)."""
        await self._call(self._io().flush())

    async def occupied(self, groups: list[str]) -> set[str]:
        """Which of `groups` have at least one member in any process, as the hub knows now.
        Without an answer in OCCUPIED_TIMEOUT (the hub changing hands, or one older than this
        op) every group counts as occupied: a publisher then renders as if all were open."""
        if not groups:
            return set()
        return await self._call(self._io().occupied(list(groups)))

    async def close(self) -> None:
        await self._call(self._io().close())

    # --- the process's I/O thread ---------------------------------------------------------

    def _io(self) -> _Connection:
        with self._lock:
            if self._pid != os.getpid():  # first use, or a forked child: a thread of its own
                self._conn = _Connection(self.address, self.capacity)
                self._pid = os.getpid()
            return self._conn

    async def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self._io().loop)
        return await asyncio.wrap_future(future)


class _Connection:
    """One process's link to the hub (and the hub itself when this process won the bind)."""

    def __init__(self, address: str, hub_capacity: int) -> None:
        self.address = address
        self.hub_capacity = hub_capacity
        self.prefix = f"specific.{secrets.token_hex(8)}"
        self.queues: dict[str, asyncio.Queue[tuple[float, Any]]] = {}
        self.memberships: set[tuple[str, str]] = set()
        self.listened: set[str] = set()
        self.asked: dict[int, asyncio.Future[list[str]]] = {}  # `occupied` awaiting the hub
        self.ids = itertools.count()
        self.writer: asyncio.StreamWriter | None = None
        self.connected: asyncio.Event | None = None
        self.server: asyncio.AbstractServer | None = None
        self.loop = asyncio.new_event_loop()
        ready = concurrent.futures.Future[None]()
        threading.Thread(target=self._run, args=(ready,), name="channel-hub", daemon=True).start()
        ready.result()

    def _run(self, ready: concurrent.futures.Future[None]) -> None:
        asyncio.set_event_loop(self.loop)
        self.connected = asyncio.Event()
        self.loop.create_task(self._keep_connected())
        ready.set_result(None)
        self.loop.run_forever()

    async def _keep_connected(self) -> None:
        while True:
            try:
                reader, writer = await self._connect_or_host()
            except OSError as exc:
                log.warning("channel hub unreachable (%s); retrying", exc)
                await asyncio.sleep(0.2)
                continue
            self.writer = writer
            writer.write(encode_frame({"op": "hello", "prefix": self.prefix}))
            for group, channel in self.memberships:
                writer.write(encode_frame({"op": "add", "g": group, "c": channel}))
            for channel in self.listened:
                writer.write(encode_frame({"op": "listen", "c": channel}))
            assert self.connected is not None
            self.connected.set()
            await self._read(reader)
            self.connected.clear()
            self.writer = None
            writer.close()

    async def _connect_or_host(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Connect to the hub; when none answers, become it (the kernel picks one winner)."""
        for _ in range(50):
            try:
                return await asyncio.open_unix_connection(self.address)
            except (ConnectionRefusedError, FileNotFoundError):
                pass
            try:
                hub = Hub(self.hub_capacity)
                self.server = await asyncio.start_unix_server(hub.serve, self.address)
                log.info("this process (pid %d) is the channel hub", os.getpid())
            except OSError:  # EADDRINUSE: another process just became the hub
                await asyncio.sleep(0.01)
        raise OSError(f"no channel hub at {self.address!r}")

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                frame = await read_frame(reader)
                if frame.get("op") == "occupied":
                    asked = self.asked.pop(frame["id"], None)
                    if asked is not None and not asked.done():
                        asked.set_result(list(frame["gs"]))
                    continue
                deadline_message = (time.monotonic(), frame["m"])
                for channel in frame["cs"]:
                    queue = self._queue(channel, self.hub_capacity)
                    if not queue.full():
                        queue.put_nowait(deadline_message)
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            log.info("channel hub connection lost; reconnecting")

    def _queue(self, channel: str, capacity: int) -> asyncio.Queue[tuple[float, Any]]:
        queue = self.queues.get(channel)
        if queue is None:
            queue = self.queues[channel] = asyncio.Queue(capacity or 100)
        return queue

    async def _write(self, frame: dict[str, Any]) -> None:
        assert self.connected is not None
        await self.connected.wait()
        assert self.writer is not None
        self.writer.write(encode_frame(frame))
        await self.writer.drain()

    async def send(self, frame: dict[str, Any]) -> None:
        channel = frame.get("c", "")
        queue = self.queues.get(channel)
        if channel.startswith(self.prefix + "!") and queue is not None and queue.full():
            raise ChannelFull(channel)
        await self._write(frame)

    async def membership(self, op: str, group: str, channel: str) -> None:
        if op == "add":
            self.memberships.add((group, channel))
        else:
            self.memberships.discard((group, channel))
        await self._write({"op": op, "g": group, "c": channel})

    async def receive(self, channel: str, capacity: int, expiry: float) -> dict[str, Any]:
        if "!" not in channel and channel not in self.listened:
            self.listened.add(channel)
            await self._write({"op": "listen", "c": channel})
        queue = self._queue(channel, capacity)
        try:
            while True:
                received_at, message = await queue.get()
                if time.monotonic() - received_at <= expiry:
                    return dict(message)
        except asyncio.CancelledError:
            # The consumer went away (it discarded its groups first): forget its queue.
            if queue.empty() and not any(c == channel for _, c in self.memberships):
                self.queues.pop(channel, None)
            raise

    async def occupied(self, groups: list[str]) -> set[str]:
        ask = next(self.ids)
        answer = self.asked[ask] = asyncio.get_running_loop().create_future()
        try:
            await self._write({"op": "occupied", "id": ask, "gs": groups})
            return set(await asyncio.wait_for(answer, OCCUPIED_TIMEOUT))
        except (TimeoutError, ConnectionError):
            return set(groups)
        finally:
            self.asked.pop(ask, None)

    async def flush(self) -> None:
        self.queues.clear()
        for group, channel in list(self.memberships):
            await self.membership("discard", group, channel)

    async def close(self) -> None:
        await self.flush()
