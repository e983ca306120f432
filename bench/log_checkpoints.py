"""What a partition log costs its caller (the event loop) in fsyncs and time, with the
recovery point and log start in per-partition files written on every flush and every move
of the log start (before), and kept in memory for the log dir's checkpoint files, which
the replica manager writes on its disk threads (now).

    .venv/bin/python bench/log_checkpoints.py --before /tmp/before --rounds 3

`--before` is an older source tree (e.g. `git archive 0629f91 | tar -x -C /tmp/before`).
Each round runs, in a fresh process per tree: `--batches` appends of 1 KiB batches into
64 KiB segments (each roll flushes), then `--deletes` DeleteRecords moves of the log start.
It counts the fsyncs made on the calling thread (deterministic) and the wall time of each
part; rounds alternate the trees (`trees.py`), and it prints the medians and their ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.trees import alternate, trees

WORKLOAD = """
import json, os, sys, time
from pathlib import Path
fsyncs = [0]
real_fsync = os.fsync
def counted(fd):
    fsyncs[0] += 1
    real_fsync(fd)
os.fsync = counted
from brokercore.clock import SystemClock
from brokercore.log import LogConfig, PartitionLog
from tests.brokercore.log.builders import make_batch
batches, deletes, directory = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
log = PartitionLog.open(directory, LogConfig(segment_bytes=64 * 1024), SystemClock())
batch = make_batch([b"x" * 1000])
figures = {}
fsyncs[0], started = 0, time.perf_counter()
for _ in range(batches):
    log.append_as_leader(batch, 0)
figures["append"] = (fsyncs[0], time.perf_counter() - started)
fsyncs[0], started = 0, time.perf_counter()
for offset in range(1, deletes + 1):
    log.delete_records_before(offset)
figures["delete"] = (fsyncs[0], time.perf_counter() - started)
print(json.dumps(figures))
"""


def measure(tree: Path, batches: int, deletes: int) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory() as scratch:
        out = subprocess.run(
            [sys.executable, "-c", WORKLOAD, str(batches), str(deletes),
             str(Path(scratch) / "bench-0")],
            cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, check=True,
            capture_output=True, text=True)
    figures: dict[str, list[float]] = json.loads(out.stdout)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=2000)
    parser.add_argument("--deletes", type=int, default=500)
    args = parser.parse_args()
    runs = alternate(
        trees(args.before), args.rounds,
        lambda tree: measure(tree, args.batches, args.deletes),
        lambda round_, name, figures: print(f"round {round_} {name}: {figures}"))
    for part in ("append", "delete"):
        print(f"{part}:")
        medians = {}
        for name, figures in runs.items():
            fsyncs = statistics.median(f[part][0] for f in figures)
            seconds = statistics.median(f[part][1] for f in figures)
            medians[name] = (fsyncs, seconds)
            print(f"  {name:6} {fsyncs:6.0f} fsyncs on the caller  {seconds * 1000:8.1f} ms")
        (f_after, s_after), (f_before, s_before) = medians["after"], medians["before"]
        print(f"  now/before: fsyncs {f_after / max(f_before, 1):.2f}, "
              f"time {s_after / s_before:.2f}")


if __name__ == "__main__":
    main()
