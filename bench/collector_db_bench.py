"""The collector's cycle with its read model on PostgreSQL, side by side with SQLite.

    python bench/collector_db_bench.py [--topics 1000 --partitions 10 --groups 1000]
                                       [--cycles 5] [--profile 25]

One built-in broker gets the large scale of `controlcenter_bench.py` (1,000 topics x 10
partitions, 1,000 groups, a quarter of them lagging). Two collectors run in child
processes (four with `--baseline DIR`: the same two from an earlier checkout), one per
database (SQLite in a temporary directory; PostgreSQL in a database
created for the run at BENCH_POSTGRES_URL and dropped after), and sample the same cluster
turn about: the first cycle (every row written), then steady cycles, each after the same
traffic (a tenth of the topics get a message per partition and the groups on them that
keep up commit it). Each cycle prints its time and where it went (the collector's
`phases`, and "pushes after": how long the live pushes, rendered on their own thread,
took to go out after the cycle ended); the table prints the medians, PostgreSQL/SQLite
ratios and the 5 s interval.
`--profile N` runs the last steady cycle of each collector under cProfile and prints the
N functions with the most cumulative time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
POSTGRES_URL = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres")
INTERVAL = 5.0


def child(bootstrap: str) -> None:
    """One collector; reads `cycle` or `profile N` lines, answers one JSON line each."""
    import cProfile
    import io
    import pstats

    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "millrace.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test import override_settings

    from controlcenter.collector.loop import Collector, CollectorConfig

    call_command("migrate", verbosity=0)
    with override_settings(KAFKA_BOOTSTRAP_SERVERS=bootstrap):
        collector = Collector(CollectorConfig(bootstrap_servers=bootstrap, interval=INTERVAL))
        print(json.dumps({"vendor": connection.vendor}), flush=True)
        for line in sys.stdin:
            command, _, arg = line.strip().partition(" ")
            profiler = cProfile.Profile() if command == "profile" else None
            if profiler is not None:
                profiler.enable()
            took = collector.cycle()
            answer: dict[str, Any] = {"took": took,
                                      "phases": dict(getattr(collector, "phases", {}))}
            pusher = getattr(collector, "pusher", None)  # pushes rendered off the cycle
            if pusher is not None:
                started = time.monotonic()
                pusher.wait(600)
                answer["phases"]["pushes after"] = time.monotonic() - started
            if profiler is not None:
                profiler.disable()
                out = io.StringIO()
                pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(
                    int(arg or 25))
                answer["profile"] = out.getvalue()
            print(json.dumps(answer), flush=True)
        collector.close()


class Child:
    def __init__(self, name: str, bootstrap: str, env: dict[str, str], repo: Path) -> None:
        self.name = name
        self.proc = subprocess.Popen(
            [sys.executable, str(repo / "bench" / Path(__file__).name), "--child", bootstrap],
            cwd=repo, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            env={**os.environ, **env})
        self.vendor = self._answer()["vendor"]
        self.times: list[float] = []
        self.phases: list[dict[str, float]] = []

    def _answer(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.name} collector exited ({self.proc.wait()})")
        return dict(json.loads(line))

    def cycle(self, profile: int = 0) -> dict[str, Any]:
        stdin = self.proc.stdin
        assert stdin is not None
        stdin.write(f"profile {profile}\n" if profile else "cycle\n")
        stdin.flush()
        return self._answer()

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(60)


def show(name: str, label: str, answer: dict[str, Any]) -> None:
    phases = ", ".join(f"{k} {v:.2f}" for k, v in answer["phases"].items())
    print(f"  {name:17} {label:10} {answer['took']:7.3f} s   ({phases})", flush=True)


def run(bootstrap: str, scale: Any, cycles: int, profile: int, baseline: Path | None) -> None:
    import psycopg

    from bench.controlcenter_bench import traffic

    databases = []
    children = []
    scratch: list[str] = []  # the collectors' data directories
    try:
        for repo, suffix in ((REPO, ""), (baseline, " before")):
            if repo is None:
                continue
            database = f"ccbench_{uuid.uuid4().hex[:10]}"
            with psycopg.connect(POSTGRES_URL, autocommit=True) as server:
                server.execute(f'CREATE DATABASE "{database}"')
            databases.append(database)
            for name, env in ((f"sqlite{suffix}", {}), (f"postgresql{suffix}", {
                    "DATABASE_URL": POSTGRES_URL.rsplit("/", 1)[0] + "/" + database})):
                env["MILLRACE_DATA_DIR"] = tempfile.mkdtemp(prefix="ccbench-db-")
                scratch.append(env["MILLRACE_DATA_DIR"])
                children.append(Child(name, bootstrap, env, repo))
        figures: dict[str, dict[str, list[float]]] = {c.name: {} for c in children}
        for c in children:
            answer = c.cycle()
            figures[c.name]["first cycle"] = [answer["took"]]
            show(c.name, "first", answer)
        for i in range(cycles):
            traffic(bootstrap, scale, i)
            last = i == cycles - 1
            for c in children:
                answer = c.cycle(profile if last else 0)
                figures[c.name].setdefault("steady cycle", []).append(answer["took"])
                figures[c.name].setdefault("cycle + pushes sent", []).append(
                    answer["took"] + answer["phases"].get("pushes after", 0.0))
                for phase, seconds in answer["phases"].items():
                    figures[c.name].setdefault(f"  {phase}", []).append(seconds)
                show(c.name, f"steady {i + 1}", answer)
                if "profile" in answer:
                    print(answer["profile"])
        table(figures)
    finally:
        for c in children:
            c.close()
        with psycopg.connect(POSTGRES_URL, autocommit=True) as server:
            for database in databases:
                server.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        for directory in scratch:
            shutil.rmtree(directory, ignore_errors=True)


def table(figures: dict[str, dict[str, list[float]]]) -> None:
    """Medians per collector; PostgreSQL/SQLite, and this code/baseline on PostgreSQL."""
    names = list(figures)
    ratios = [("pg/sqlite", "postgresql", "sqlite")]
    if "postgresql before" in figures:
        ratios += [("pg/pg before", "postgresql", "postgresql before"),
                   ("pg before/sqlite before", "postgresql before", "sqlite before")]
    print(f"\n{'median seconds':22}" + "".join(f"{n:>19}" for n in names)
          + "".join(f"{r[0]:>25}" for r in ratios))
    metrics = list(dict.fromkeys(m for n in names for m in figures[n]))
    for metric in metrics:
        medians = {n: statistics.median(figures[n][metric]) if figures[n].get(metric) else None
                   for n in names}
        line = f"{metric:22}" + "".join(
            f"{v:19.3f}" if v is not None else f"{'-':>19}" for v in medians.values())
        for _, top, bottom in ratios:
            a, b = medians.get(top), medians.get(bottom)
            line += f"{a / b:25.2f}" if a is not None and b else f"{'-':>25}"
        print(line)
    print(f"{'steady cycle (max)':22}" + "".join(
        f"{max(figures[n]['steady cycle']):19.3f}" for n in names))
    print(f"(interval {INTERVAL:.0f} s)")


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--cycles", type=int, default=5)
    parser.add_argument("--profile", type=int, default=0, metavar="N")
    parser.add_argument("--baseline", type=Path, metavar="DIR",
                        help="a checkout of an earlier commit (with this script copied into "
                             "its bench/): its collector runs side by side, as 'before'")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from bench.controlcenter_bench import Scale, create_scale
    from tests.brokerproc import BrokerProcess

    scale = Scale("large", args.topics, args.partitions, args.groups)
    data = Path(tempfile.mkdtemp(prefix="ccbench-broker-"))
    broker = BrokerProcess(data, {"num.partitions": str(args.partitions)})
    broker.start()
    try:
        started = time.perf_counter()
        create_scale(broker.bootstrap, scale)
        print(f"{args.topics} topics x {args.partitions} partitions, {args.groups} groups set "
              f"up in {time.perf_counter() - started:.0f} s", flush=True)
        run(broker.bootstrap, scale, args.cycles, args.profile, args.baseline)
    finally:
        broker.stop()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
