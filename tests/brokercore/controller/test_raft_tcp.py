"""The quorum over real sockets: three voters in one process on the controller listener."""

from __future__ import annotations

import asyncio
import random
import struct
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from brokercore.controller.errors import ControllerError
from brokercore.controller.image import Record
from brokercore.controller.listener import Address, ControllerServer, RpcClient, TcpTransport
from brokercore.controller.raft import RaftConfig, RaftNode, Role
from brokercore.controller.raft_storage import Entry, MemoryRaftStorage
from brokercore.controller.raft_transport import (
    AppendRequest,
    AppendResponse,
    AsyncioScheduler,
    VoteRequest,
    VoteResponse,
)
from brokercore.controller.wire import FrameError, decode_message, encode_frame, encode_message
from brokercore.protocol.errors import ErrorCode

CONFIG = RaftConfig(election_timeout=0.3, heartbeat_interval=0.05)


async def _echo(method: str, args: dict[str, Any]) -> tuple[Any, int]:
    if method == "fail":
        raise ControllerError(ErrorCode.NOT_CONTROLLER, "not me")
    return {"method": method, "args": args}, 7


class Voter:
    def __init__(self, node_id: int, addresses: dict[int, Address],
                 storage: MemoryRaftStorage) -> None:
        self.node_id = node_id
        self.addresses = addresses
        self.storage = storage
        self.applied: list[tuple[int, Record]] = []
        self.transport = TcpTransport(node_id, addresses)
        self.server = ControllerServer("127.0.0.1", addresses[node_id][1], self.transport,
                                       _echo)
        self.node: RaftNode | None = None

    async def start(self) -> None:
        port = await self.server.start()
        self.addresses[self.node_id] = ("127.0.0.1", port)

    def join(self) -> RaftNode:
        self.node = RaftNode(
            self.node_id, set(self.addresses), self.storage, self.transport,
            AsyncioScheduler(), config=CONFIG, rng=random.Random(self.node_id),
            apply=lambda offset, record: self.applied.append((offset, record)))
        return self.node

    async def stop(self) -> None:
        if self.node is not None:
            self.node.stop()
        await self.transport.close()
        await self.server.stop()


async def _until(condition: Callable[[], bool]) -> None:
    """Poll `condition` (real sockets: there is no event to wait on) for up to 20 s."""
    async with asyncio.timeout(20):
        while not condition():  # noqa: ASYNC110
            await asyncio.sleep(0.01)


@pytest.fixture
async def voters() -> AsyncIterator[dict[int, Voter]]:
    addresses: dict[int, Address] = {i: ("127.0.0.1", 0) for i in (1, 2, 3)}
    started = {i: Voter(i, addresses, MemoryRaftStorage()) for i in addresses}
    for voter in started.values():
        await voter.start()
    for voter in started.values():
        voter.join()
    yield started
    for voter in started.values():
        await voter.stop()


def _leader(voters: dict[int, Voter]) -> RaftNode | None:
    leaders = [v.node for v in voters.values() if v.node and v.node.role is Role.LEADER
               and not v.node._stopped]
    return max(leaders, key=lambda n: n.term, default=None)


async def test_three_voters_over_tcp_elect_a_leader_and_commit(
        voters: dict[int, Voter]) -> None:
    await _until(lambda: _leader(voters) is not None)
    leader = _leader(voters)
    assert leader is not None
    offset = await asyncio.wait_for(leader.propose([{"type": "test", "n": 1}]), 10)
    await _until(lambda: all(v.applied for v in voters.values()))
    assert all(v.applied == [(offset, {"type": "test", "n": 1})] for v in voters.values())
    assert {v.node.leader_id for v in voters.values() if v.node} == {leader.node_id}


async def test_a_restarted_voter_reconnects_and_catches_up(voters: dict[int, Voter]) -> None:
    await _until(lambda: _leader(voters) is not None)
    leader = _leader(voters)
    assert leader is not None
    victim = next(v for i, v in voters.items() if i != leader.node_id)
    await victim.stop()
    await asyncio.wait_for(leader.propose([{"type": "test", "n": 2}]), 10)
    # Same storage, same port: a process restart as far as the quorum can tell.
    restarted = Voter(victim.node_id, victim.addresses, victim.storage)
    voters[victim.node_id] = restarted
    await restarted.start()
    restarted.join()
    await _until(lambda: [r for _, r in restarted.applied] == [{"type": "test", "n": 2}])
    current = _leader(voters)
    assert current is not None
    await asyncio.wait_for(current.propose([{"type": "test", "n": 3}]), 10)
    await _until(lambda: len(restarted.applied) == 2)


async def test_rpc_answers_results_and_error_codes(voters: dict[int, Voter]) -> None:
    client = RpcClient(voters[1].addresses)
    try:
        result, offset = await client.call(2, "hello", {"x": 1})
        assert (result, offset) == ({"method": "hello", "args": {"x": 1}}, 7)
        with pytest.raises(ControllerError) as excinfo:
            await client.call(3, "fail", {})
        assert excinfo.value.error_code == ErrorCode.NOT_CONTROLLER
    finally:
        await client.close()


async def test_garbage_on_the_listener_closes_only_that_connection(
        voters: dict[int, Voter]) -> None:
    host, port = voters[1].addresses[1]
    for garbage in (struct.pack(">I", 3) + b"{{{", struct.pack(">I", 2**31) + b"x",
                    encode_frame({"raft": {"type": "append_request", "term": "x"}, "from": 2}),
                    encode_frame({"what": 1})):
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(garbage)
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 10) == b""
        writer.close()
    client = RpcClient(voters[2].addresses)
    try:
        assert (await client.call(1, "still", {}))[1] == 7
    finally:
        await client.close()


@pytest.mark.parametrize("message", [
    VoteRequest(3, 1, 10, 2),
    VoteResponse(3, 2, True),
    AppendRequest(4, 1, 9, 3, (Entry(4, {"type": "topic", "name": "t"}),
                               Entry(4, {"type": "leader_change"}, control=True)), 8),
    AppendResponse(4, 3, False, -1),
])
def test_messages_round_trip_through_json(message: Any) -> None:
    assert decode_message(encode_message(message)) == message


@pytest.mark.parametrize("raw", [
    {"type": "vote_response", "term": 1, "voter_id": 2, "granted": "yes"},
    {"type": "vote_request", "term": True, "candidate_id": 1, "last_log_offset": 0,
     "last_log_term": 0},
    {"type": "append_request", "term": 1, "leader_id": 1, "prev_log_offset": 0,
     "prev_log_term": 0, "entries": [{"term": 1, "control": False, "record": []}],
     "leader_commit": 0},
    {"type": "__import__"},
    [],
])
def test_malformed_messages_are_refused(raw: Any) -> None:
    with pytest.raises(FrameError):
        decode_message(raw)
