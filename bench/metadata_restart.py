"""How long a controller takes to come back after many metadata records, with and without
snapshots, side by side in one run.

The same records (topics, then rounds of topic config changes) are written through a lone
controller twice: once with snapshots every `--snapshot-bytes` of records (KIP-630), once
with snapshots off (a threshold no run reaches, the log replayed from offset 0). Then each
is restarted `--restarts` times; it prints the median time until the controller has caught
up, the metadata directory's size on disk, and the ratios snapshot/full.

    .venv/bin/python bench/metadata_restart.py [--rounds 1000] [--snapshot-bytes 1000000]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from brokercore.config import BrokerConfig
from brokercore.controller.controller import Controller, NewTopic

TOPICS = 10
KEYS = ("retention.ms", "segment.ms", "retention.bytes", "delete.retention.ms", "flush.ms",
        "flush.messages")


def config(directory: Path, snapshot_bytes: int) -> BrokerConfig:
    return BrokerConfig({"node.id": "1", "log.dirs": str(directory),
                         "metadata.log.max.record.bytes.between.snapshots": str(snapshot_bytes)})


async def write(directory: Path, snapshot_bytes: int, rounds: int) -> int:
    """Topics, then `rounds` of config changes (every key of every topic); the log end."""
    controller = Controller(config(directory, snapshot_bytes), directory / "meta")
    await controller.start()
    await controller.register_broker(1, "127.0.0.1", 9092)  # somewhere to place partitions
    for _, error in await controller.create_topics(
            [NewTopic(f"t{i}", 10, 1) for i in range(TOPICS)]):
        assert error is None, error
    for n in range(rounds):
        for i in range(TOPICS):
            await controller.alter_topic_configs(
                f"t{i}", {key: str(1_000_000 + n) for key in KEYS}, validate_only=False)
    end = controller.log_end_offset
    await controller.stop()
    return end


async def restart(directory: Path, snapshot_bytes: int) -> float:
    controller = Controller(config(directory, snapshot_bytes), directory / "meta")
    started = time.perf_counter()
    await controller.start()
    elapsed = time.perf_counter() - started
    await controller.stop()
    return elapsed


def disk_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in (directory / "meta").iterdir() if p.is_file())


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--snapshot-bytes", type=int, default=1_000_000)
    parser.add_argument("--restarts", type=int, default=5)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # a lone controller fences its silent broker
    modes = {"snapshots": args.snapshot_bytes, "full replay": 2**62}
    with tempfile.TemporaryDirectory() as tmp:
        dirs = {mode: Path(tmp) / mode.replace(" ", "-") for mode in modes}
        ends = {mode: await write(dirs[mode], modes[mode], args.rounds) for mode in modes}
        times: dict[str, list[float]] = {mode: [] for mode in modes}
        for _ in range(args.restarts):  # interleaved, so drift hits both alike
            for mode in modes:
                times[mode].append(await restart(dirs[mode], modes[mode]))
        print(f"{ends['full replay']:,} metadata records, median of {args.restarts} restarts")
        for mode in modes:
            print(f"  {mode:12} {statistics.median(times[mode]) * 1000:8.0f} ms to catch up, "
                  f"{disk_bytes(dirs[mode]) / 1e6:7.2f} MB on disk")
        ratio = statistics.median(times["snapshots"]) / statistics.median(times["full replay"])
        size = disk_bytes(dirs["snapshots"]) / disk_bytes(dirs["full replay"])
        print(f"  snapshot/full: restart time {ratio:.2f}, disk {size:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
