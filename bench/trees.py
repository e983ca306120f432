"""Running the same measurement on this tree and on an older source tree (`--before DIR`,
e.g. a `git archive` of an earlier commit), in alternating rounds of one run, so that the
ratios hold while the machine's speed drifts."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

HERE = Path(__file__).resolve().parent.parent
T = TypeVar("T")


def trees(before: Path | None) -> dict[str, Path]:
    """"after" (this tree) and, when given, "before"."""
    return {"after": HERE} | ({"before": before.resolve()} if before else {})


def alternate(trees: dict[str, Path], rounds: int, measure: Callable[[Path], T],
              show: Callable[[int, str, T], None]) -> dict[str, list[T]]:
    """Each round measures every tree in turn; `show(round, name, figure)` prints each."""
    runs: dict[str, list[T]] = {name: [] for name in trees}
    for round_ in range(rounds):
        for name, tree in trees.items():
            figure = measure(tree)
            runs[name].append(figure)
            show(round_ + 1, name, figure)
    return runs


def start(tree: Path, args: list[str], output: Path, ready: bytes,
          limit: float) -> subprocess.Popen[bytes]:
    """`python ARGS` run from `tree` (its own packages first on sys.path, not the installed
    ones), once `ready` is in its output."""
    with open(output, "wb") as out:
        proc = subprocess.Popen([sys.executable, *args], cwd=tree, stdout=out,
                                stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONPATH": str(tree)})
    deadline = time.monotonic() + limit
    while ready not in output.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"{args} from {tree} did not start:\n{output.read_text()}")
        time.sleep(0.05)
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
