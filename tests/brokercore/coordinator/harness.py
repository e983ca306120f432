"""A coordinator on a fake clock and in-memory `__consumer_offsets`, driven without sockets."""

from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass, field

from brokercore.clock import FakeClock
from brokercore.coordinator.config import CoordinatorConfig
from brokercore.coordinator.coordinator import GroupCoordinator
from brokercore.coordinator.membership import JoinRequest
from brokercore.coordinator.offsets_topic import MemoryOffsetsTopic
from brokercore.coordinator.state import Group, JoinResult, SyncResult
from brokercore.protocol.errors import ErrorCode

SESSION_MS = 10_000
REBALANCE_MS = 30_000
# Long enough for a test to start several joins before the first generation forms.
INITIAL_DELAY_MS = 100


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: version, [topic], user_data."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    return out + struct.pack(">i", -1)


@dataclass
class Harness:
    clock: FakeClock = field(default_factory=FakeClock)
    store: MemoryOffsetsTopic = field(default_factory=MemoryOffsetsTopic)
    config: CoordinatorConfig = field(default_factory=lambda: CoordinatorConfig(
        initial_rebalance_delay_ms=INITIAL_DELAY_MS, min_session_timeout_ms=1000))

    def __post_init__(self) -> None:
        self.coordinator = GroupCoordinator(self.store, self.clock, self.config)

    def restart(self) -> None:
        """A new coordinator replaying the same `__consumer_offsets`."""
        self.coordinator = GroupCoordinator(self.store, self.clock, self.config)

    def group(self, group_id: str = "g") -> Group:
        return self.coordinator.groups.classic[group_id]

    def start_join(
        self, member_id: str = "", group_id: str = "g",
        protocols: list[tuple[str, bytes]] | None = None, instance_id: str | None = None,
        session_ms: int = SESSION_MS, require_known_member: bool = False,
    ) -> asyncio.Task[JoinResult]:
        request = JoinRequest(
            group_id=group_id, member_id=member_id, group_instance_id=instance_id,
            client_id="c", client_host="/127.0.0.1", session_timeout_ms=session_ms,
            rebalance_timeout_ms=REBALANCE_MS, protocol_type="consumer",
            protocols=protocols or [("range", subscription("t"))],
            require_known_member=require_known_member,
        )
        return asyncio.ensure_future(self.coordinator.membership.join(request))

    async def join(self, member_id: str = "", **kw: object) -> JoinResult:
        task = self.start_join(member_id, **kw)  # type: ignore[arg-type]
        await settle()
        if not task.done():
            self.advance(INITIAL_DELAY_MS / 1000)
            await settle()
        assert task.done(), "join is still waiting for the rebalance"
        return task.result()

    def start_sync(
        self, result: JoinResult, assignments: dict[str, bytes] | None = None,
        group_id: str = "g", instance_id: str | None = None,
    ) -> asyncio.Task[SyncResult]:
        return asyncio.ensure_future(self.coordinator.membership.sync(
            group_id, result.generation_id, result.member_id, instance_id, (None, None),
            assignments or {},
        ))

    async def stable_group(self, size: int) -> list[JoinResult]:
        """`size` members joined in one generation, each assigned its own member id."""
        tasks = [self.start_join() for _ in range(size)]
        await settle()
        self.advance(INITIAL_DELAY_MS / 1000)
        await settle()
        results = [t.result() for t in tasks]
        assert all(r.error_code == ErrorCode.NONE for r in results), results
        leader = next(r for r in results if r.members)
        syncs = [self.start_sync(r, {m: m.encode() for m, _, _ in leader.members}
                                 if r is leader else None) for r in results]
        await settle()
        assert all(s.result().error_code == ErrorCode.NONE for s in syncs)
        return results

    def heartbeat(self, result: JoinResult, group_id: str = "g") -> ErrorCode:
        return self.coordinator.membership.heartbeat(
            group_id, result.generation_id, result.member_id, None)

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.coordinator.tick()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)
