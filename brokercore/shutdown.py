"""Bounded shutdown steps: a clean stop is clean whatever the quorum or a client does.

Every step of a broker's stop runs under its own time limit. A step that overruns is
cancelled and left behind, with a warning, rather than awaited: awaiting a task that does not
end on cancellation (asyncio.wait_for in Python 3.11 can swallow a cancel that races with
its result) would hang the whole stop. `asyncio.wait` never waits past its timeout.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable

log = logging.getLogger(__name__)

# What one step of a broker's stop may take; the supervisor's SIGKILL comes after 15 s.
STEP_SECONDS = 2.0
# What the tasks still running after the broker has stopped get to end on cancellation.
LEFTOVER_SECONDS = 2.0


async def bounded(node_id: int, what: str, work: Awaitable[object], seconds: float) -> None:
    task = asyncio.ensure_future(work)
    done, _ = await asyncio.wait({task}, timeout=seconds)
    if not done:
        task.cancel()
        log.warning("node %d: %s did not finish within %.1fs; going on", node_id, what, seconds)
    elif not task.cancelled() and task.exception() is not None:
        log.warning("node %d: %s failed: %r", node_id, what, task.exception())


def close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """asyncio.run's ending, bounded: cancel what is left, wait a moment, close the loop."""
    try:
        left = asyncio.all_tasks(loop)
        for task in left:
            task.cancel()
        if left:
            _, stuck = loop.run_until_complete(asyncio.wait(left, timeout=LEFTOVER_SECONDS))
            if stuck:
                log.warning("%d tasks did not end on cancellation; closing anyway", len(stuck))
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()
