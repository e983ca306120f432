"""The longest event-loop stall while a broker takes over many leaderships at once, with the
leader-epoch checkpoints written on the loop (before) and on the disk threads (now).

    .venv/bin/python bench/failover_epochs.py --partitions 500 --rounds 3

A replica manager (the broker's, no sockets) follows `--partitions` leaderless partitions
with a record in each; then one batch of `partition_change` records makes it leader of all
of them, as the controller writes when the old leader is fenced. A ticker task wakes every
millisecond, and the longest gap between its wake-ups is the longest stall of the loop.

- before: each new leadership writes its epoch checkpoint (write, fsync, rename, fsync of
  the dir) in the apply step, as `become_leader` did until now: the bench writes them
  right after applying the batch, in the same loop step.
- now: the replica manager writes them on its disk threads (`EpochCheckpoints`).

Rounds alternate the two on fresh dirs; it prints the medians and their ratio, and how
long until every checkpoint was on disk.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from brokercore.clock import SystemClock
from brokercore.config import BrokerConfig
from brokercore.controller.image import MetadataImage, Record
from brokercore.controller.records import from_json
from brokercore.replication.log_dirs import open_log_dirs
from brokercore.replication.replica_manager import ReplicaManager


class Ticker:
    def __init__(self) -> None:
        self.longest = 0.0
        self.task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        last = loop.time()
        while True:
            await asyncio.sleep(0.001)
            now = loop.time()
            self.longest = max(self.longest, now - last)
            last = now

    def start(self) -> None:
        self.task = asyncio.create_task(self._run())

    async def stop(self) -> float:
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        return self.longest


async def one_round(data: Path, partitions: int, on_loop: bool) -> tuple[float, float]:
    """(longest stall, seconds until every epoch checkpoint was written)."""
    config = BrokerConfig({"node.id": "1", "log.dirs": str(data)})
    image = MetadataImage()
    manager = ReplicaManager(config, image, open_log_dirs(config.log_dirs, 1), SystemClock())
    offset = 0

    def apply(records: list[Record]) -> None:
        nonlocal offset
        for raw in records:
            record = from_json(raw)
            image.apply(record, offset)
            manager.on_metadata(record)
            offset += 1

    topic_id = str(uuid.uuid4())
    apply([{"type": "broker", "node_id": 1, "host": "127.0.0.1", "port": 1, "epoch": 0},
           {"type": "topic", "name": "failover", "topic_id": topic_id}])
    apply([{"type": "partition", "topic_id": topic_id, "partition": p, "replicas": [1, 2],
            "isr": [1, 2], "leader": -1, "leader_epoch": 0} for p in range(partitions)])
    await manager.settled()
    ticker = Ticker()
    ticker.start()
    await asyncio.sleep(0.2)
    started = time.monotonic()
    apply([{"type": "partition_change", "topic_id": topic_id, "partition": p, "leader": 1,
            "leader_epoch": 1, "isr": [1]} for p in range(partitions)])
    if on_loop:  # what become_leader did in the apply step until now
        for partition in manager.partitions.values():
            partition.log.epochs.persist()
    # Nothing signals the disk threads' last write; a millisecond poll is precise enough.
    while any(p.log.epochs.dirty for p in manager.partitions.values()):  # noqa: ASYNC110
        await asyncio.sleep(0.001)
    written = time.monotonic() - started
    await asyncio.sleep(0.2)
    stall = await ticker.stop()
    assert all(p.is_leader for p in manager.partitions.values())
    await manager.stop()
    return stall, written


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    runs: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    for _ in range(args.rounds):
        for on_loop in (True, False):
            with tempfile.TemporaryDirectory(prefix="failover-epochs-") as tmp:
                runs[on_loop].append(await one_round(Path(tmp), args.partitions, on_loop))
    print(f"{args.partitions} leaderships taken over at once, {args.rounds} rounds each")
    medians = {}
    for on_loop, label in ((True, "before (on the loop)"), (False, "now (disk threads)")):
        stall = statistics.median(s for s, _ in runs[on_loop])
        written = statistics.median(w for _, w in runs[on_loop])
        medians[on_loop] = stall
        print(f"  {label:22s} longest stall {stall * 1000:8.1f} ms   "
              f"all checkpoints written after {written * 1000:8.1f} ms")
    print(f"  stall ratio now/before: {medians[False] / medians[True]:.3f}")


if __name__ == "__main__":
    asyncio.run(main())
