"""Consumer groups through aiokafka against the built-in broker.

aiokafka's admin client has no DeleteGroups; list, offsets and describe are checked.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
import uuid
from collections.abc import Callable

import aiokafka
from aiokafka.admin import AIOKafkaAdminClient

from tests.brokerproc import BrokerProcess
from tests.compat.groups import (
    BROKER_OVERRIDES,
    HEARTBEAT_MS,
    PARTITIONS,
    SESSION_MS,
    Record,
    async_wait_until,
    create_topic,
    partitioned,
    produce,
    start_assigned_victim,
    values,
)


class Member:
    """A consumer polled by its own task; records what it got and owns."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.consumer = aiokafka.AIOKafkaConsumer(
            topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
            auto_offset_reset="earliest", session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
        )
        self.consumed: list[Record] = []
        self.assignment: set[int] = set()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> Member:
        await self.consumer.start()
        self._task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        while True:
            batches = await self.consumer.getmany(timeout_ms=100)
            self.consumed += [(r.partition, r.offset, r.value)
                              for rs in batches.values() for r in rs]
            self.assignment = {tp.partition for tp in self.consumer.assignment()}

    async def stop_polling(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def drain(self, end: int) -> None:
        async def positions() -> list[int]:
            return [await self.consumer.position(tp) for tp in self.consumer.assignment()]

        while any(p != end for p in await positions()):
            await self.consumer.getmany(timeout_ms=50)


async def _admin(bootstrap: str) -> AIOKafkaAdminClient:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    return admin


async def test_three_members_share_partitions_commit_and_resume_after_a_restart(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory(BROKER_OVERRIDES)
    topic = create_topic(broker.bootstrap, "grp-aiokafka")
    produce(broker.bootstrap, topic, 5, "first")
    group = f"g-{uuid.uuid4().hex[:8]}"

    members: list[Member] = []
    for size in (1, 2, 3):
        members.append(await Member(broker.bootstrap, topic, group).start())
        await async_wait_until(
            functools.partial(lambda n: partitioned([m.assignment for m in members], n), size),
            f"{size} member(s) to own every partition once")
    leaver = members.pop(0)
    await leaver.stop_polling()
    await leaver.consumer.stop()
    await async_wait_until(lambda: partitioned([m.assignment for m in members], 2),
                           "the two remaining members to take over")
    for member in members:
        await member.stop_polling()
        await asyncio.wait_for(member.drain(5), 30)
    for member in members:
        await member.consumer.commit()
    for member in members:
        await member.consumer.stop()

    broker.restart()

    admin = await _admin(broker.bootstrap)
    assert (group, "consumer") in [tuple(g) for g in await admin.list_consumer_groups()]
    offsets = await admin.list_consumer_group_offsets(group)
    assert {tp.partition: om.offset for tp, om in offsets.items()} == dict.fromkeys(
        range(PARTITIONS), 5)
    [described] = await admin.describe_consumer_groups([group])
    assert described.groups[0][:3] == (0, group, "Empty")  # error_code, group_id, state
    second = produce(broker.bootstrap, topic, 1, "second")
    member = await Member(broker.bootstrap, topic, group).start()
    await async_wait_until(lambda: len(member.consumed) >= len(second),
                           "the messages after the commit")
    await asyncio.sleep(0.5)
    await member.stop_polling()
    assert sorted(values(member.consumed)) == sorted(second)
    await member.consumer.stop()
    await admin.close()


async def test_a_member_that_stops_heartbeating_is_evicted(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory(BROKER_OVERRIDES)
    topic = create_topic(broker.bootstrap, "grp-aiokafka-dead")
    group = f"g-{uuid.uuid4().hex[:8]}"
    victim = await asyncio.to_thread(start_assigned_victim, "aiokafka", broker.bootstrap,
                                     topic, group)
    survivor = await Member(broker.bootstrap, topic, group).start()
    await async_wait_until(lambda: 0 < len(survivor.assignment) < PARTITIONS,
                           "the partitions to be shared")

    victim.kill()
    victim.wait()

    killed_at = time.monotonic()
    await async_wait_until(lambda: len(survivor.assignment) == PARTITIONS,
                           "the survivor to own everything")
    assert time.monotonic() - killed_at > SESSION_MS / 1000 / 2
    await survivor.stop_polling()
    await survivor.consumer.stop()
