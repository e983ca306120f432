"""Sums a profiled run's per-test lines (conftest.py's MILLRACE_TEST_PROFILE) by file and by
directory: wall seconds, CPU seconds of the test processes and of the children they reaped.

    MILLRACE_TEST_PROFILE=/tmp/prof make test && .venv/bin/python -m tests.profile_report /tmp/prof
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path


def main(directory: str, top: int = 30) -> None:
    by_file: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    for log in Path(directory).glob("*.jsonl"):
        for line in log.read_text().splitlines():
            row = json.loads(line)
            figures = by_file[row["test"].split("::", 1)[0].removeprefix("tests/")]
            figures[0] += row["wall"]
            figures[1] += row["cpu"]
            figures[2] += row["children_cpu"]
            figures[3] += 1
    by_dir: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    for name, figures in by_file.items():
        directory_figures = by_dir[name.rsplit("/", 1)[0] if "/" in name else "."]
        for i, value in enumerate(figures):
            directory_figures[i] += value
    for title, table in (("file", by_file), ("directory", by_dir)):
        total = [sum(f[i] for f in table.values()) for i in range(3)]
        print(f"\n{title:<60} {'tests':>5} {'wall s':>8} {'cpu s':>7} {'child s':>8}")
        longest = sorted(table.items(), key=lambda kv: -kv[1][0])[:top]
        for name, (wall, cpu, children, tests) in longest:
            print(f"{name:<60} {tests:>5} {wall:>8.1f} {cpu:>7.1f} {children:>8.1f}")
        print(f"{'all':<60} {'':>5} {total[0]:>8.1f} {total[1]:>7.1f} {total[2]:>8.1f}")


if __name__ == "__main__":
    main(sys.argv[1])
