"""Sums a profiled run's per-test lines (conftest.py's MILLRACE_TEST_PROFILE) by file and by
directory: tests, wall seconds and the CPU seconds of the test processes' trees.

    MILLRACE_TEST_PROFILE=/tmp/prof make test && .venv/bin/python -m tests.profile_report /tmp/prof
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path


def main(directory: str, top: int = 30) -> None:
    by_file: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for log in Path(directory).glob("*.jsonl"):
        for line in log.read_text().splitlines():
            row = json.loads(line)
            figures = by_file[row["test"].split("::", 1)[0].removeprefix("tests/")]
            figures[0] += row["wall"]
            figures[1] += row["cpu"]
            figures[2] += 1
    by_dir: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for name, figures in by_file.items():
        directory_figures = by_dir[name.rsplit("/", 1)[0] if "/" in name else "."]
        for i, value in enumerate(figures):
            directory_figures[i] += value
    for title, table in (("file", by_file), ("directory", by_dir)):
        print(f"\n{title:<64} {'tests':>5} {'wall s':>8} {'cpu s':>8}")
        for name, (wall, cpu, tests) in sorted(table.items(), key=lambda kv: -kv[1][0])[:top]:
            print(f"{name:<64} {tests:>5} {wall:>8.1f} {cpu:>8.1f}")
        wall, cpu = (sum(figures[i] for figures in table.values()) for i in range(2))
        print(f"{'all':<64} {'':>5} {wall:>8.1f} {cpu:>8.1f}")


if __name__ == "__main__":
    main(sys.argv[1])
