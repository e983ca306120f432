"""Delivery reports reach the request that waits for them: a large request's on its own
event loop (no GIL taken per report by the producer's thread), a small one's from the
producer's thread, and a report nobody waits for is still served."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

from restproxy.client import (
    LOOP_DRAIN_MIN_RECORDS,
    THREAD_POLL_INTERVAL,
    OutgoingRecord,
    PendingBatch,
    gateway,
)

pytestmark = pytest.mark.usefixtures("proxy_cluster")


def _threads_of_reports(batch: PendingBatch) -> list[str]:
    """Record, per report, the thread its callback ran on."""
    seen: list[str] = []
    delivered = batch.delivered

    def on_thread(index: int, err: object, msg: object) -> None:
        seen.append(threading.current_thread().name)
        delivered(index, err, msg)

    batch.delivered = on_thread  # type: ignore[method-assign]
    return seen


async def _produce(topic: str, count: int) -> tuple[list[str], PendingBatch, str]:
    kafka = gateway()
    batch = PendingBatch(count, kafka)
    seen = _threads_of_reports(batch)
    for index in range(count):
        kafka.produce_one(topic, OutgoingRecord(b"v%d" % index), batch, index)
    await batch.all_done_within(30)
    return seen, batch, threading.current_thread().name


async def _produce_while_polling(topic: str, count: int
                                 ) -> tuple[list[str], PendingBatch, str]:
    """As a busy worker does: another large request is already waiting on this loop, so
    the gateway's thread has left its last poll (it may serve what arrives during one)."""
    waiting = PendingBatch(LOOP_DRAIN_MIN_RECORDS, gateway())  # never produced
    other = asyncio.create_task(waiting.all_done())
    await asyncio.sleep(0)  # the task starts waiting, and the loop polling
    assert gateway()._drainers
    await asyncio.sleep(THREAD_POLL_INTERVAL * 4)
    try:
        return await _produce(topic, count)
    finally:
        other.cancel()


def test_a_large_request_s_reports_are_served_on_its_own_loop(
        new_topic: Callable[..., str]) -> None:
    topic = new_topic(partitions=2)
    seen, batch, loop_thread = asyncio.run(_produce_while_polling(topic, 500))
    assert all(r.error is None and r.offset is not None for r in batch.reports)
    assert seen.count(loop_thread) == len(seen) == 500


def test_a_small_request_s_reports_come_from_the_producer_thread(
        new_topic: Callable[..., str]) -> None:
    topic = new_topic()
    seen, batch, loop_thread = asyncio.run(_produce(topic, LOOP_DRAIN_MIN_RECORDS - 1))
    assert all(r.error is None for r in batch.reports)
    assert loop_thread not in seen and set(seen) == {"restproxy-producer"}


def test_reports_nobody_waits_for_are_served_once_the_loop_stops_waiting(
        new_topic: Callable[..., str]) -> None:
    topic = new_topic()

    async def give_up_early() -> PendingBatch:
        kafka = gateway()
        batch = PendingBatch(100, kafka)
        for index in range(100):
            kafka.produce_one(topic, OutgoingRecord(b"x"), batch, index)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0):
                await batch.all_done()
        return batch

    batch = asyncio.run(give_up_early())
    assert not gateway()._drainers  # the loop stopped polling: the thread serves the rest
    done = threading.Event()
    for _ in range(300):
        if batch.remaining == 0:
            done.set()
            break
        done.wait(0.1)
    assert done.is_set(), f"{batch.remaining} reports never came"
