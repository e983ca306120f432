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
`phases`; CPU seconds of the collector's process through its read, analyze and write, and
the cycle; and "pushes after": how long the live pushes, rendered on their own thread,
took to go out after the cycle ended); the table prints the medians, PostgreSQL/SQLite
ratios and the 5 s interval.
`--profile N` runs the last steady cycle of each collector under cProfile and prints the
N functions with the most cumulative time; with py-spy installed (`pip install py-spy`, not a
dependency) it also samples the broker through that last round and prints the N broker
functions with the most samples, inclusive and own: the broker's side of the read.

Then the read's largest request on its own, turn about on the same cluster, wall and CPU
seconds: the end offsets of every partition through AdminClient.list_offsets (a future per
partition), through librdkafka with one future for the whole answer (clusterclient before
issue 24's fourth round) and through ClusterClient.list_offsets now (one ListOffsets per
leader over clusterclient's own connections). `--paths-only` skips the collectors and
measures only that.

Without a broker, in process on made-up readings of the same shape (`made_up_readings`),
this tree against `--baseline` turn about: `--analyze-only`, the analyze phase in CPU
seconds; `--write-only`, the analyze and write phases into a PostgreSQL database each, the
write of the last round profiled with `--profile N`.
"""

from __future__ import annotations

import argparse
import itertools
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
        cpu = cpu_clocks(collector)
        print(json.dumps({"vendor": connection.vendor}), flush=True)
        for line in sys.stdin:
            command, _, arg = line.strip().partition(" ")
            profiler = cProfile.Profile() if command == "profile" else None
            if profiler is not None:
                profiler.enable()
            cpu.clear()
            started = time.process_time()
            took = collector.cycle()
            cpu["cycle"] = time.process_time() - started
            answer: dict[str, Any] = {"took": took, "cpu": dict(cpu),
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


def cpu_clocks(collector: Any) -> dict[str, float]:
    """CPU seconds of the collector's process (all its threads: librdkafka's, the group
    reads') while its read, analyze and write ran, by wrapping the three calls; less
    moved by the machine's load than the phases' wall seconds, and the same for any tree."""
    spent: dict[str, float] = {}

    def clocked(name: str, call: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            started = time.process_time()
            try:
                return call(*args, **kwargs)
            finally:
                spent[name] = spent.get(name, 0.0) + time.process_time() - started
        return run

    collector.sampler.read = clocked("read", collector.sampler.read)
    collector.analyzer.analyze = clocked("analyze", collector.analyzer.analyze)
    collector.store.write = clocked("write", collector.store.write)
    return spent


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
    cpu = ", ".join(f"{k} {v:.2f}" for k, v in answer.get("cpu", {}).items())
    print(f"  {name:17} {label:10} {answer['took']:7.3f} s   ({phases}; CPU s: {cpu})",
          flush=True)


class BrokerSampler:
    """py-spy on the broker process for a while, then its busiest functions."""

    def __init__(self, pid: int) -> None:
        self.out = Path(tempfile.mkdtemp(prefix="ccbench-spy-")) / "broker.txt"
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        self.proc = subprocess.Popen(
            [spy, "record", "--pid", str(pid), "--format", "raw", "--rate", "50",
             "--nonblocking", "--output", str(self.out)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) if Path(spy).exists() else None

    def report(self, top: int) -> None:
        if self.proc is None:
            print("(py-spy not installed: no broker profile)")
            return
        self.proc.send_signal(2)  # py-spy writes what it sampled on SIGINT
        self.proc.wait(120)
        inclusive: dict[str, int] = {}
        own: dict[str, int] = {}
        total = 0
        for line in self.out.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            frames = [f.split(" (")[0] + " (" + f.split(" (")[-1].split(":")[0].rsplit("/", 1)[-1]
                      for f in stack.split(";") if f]
            n = int(count)
            total += n
            for frame in set(frames):
                inclusive[frame] = inclusive.get(frame, 0) + n
            if frames:
                own[frames[-1]] = own.get(frames[-1], 0) + n
        shutil.rmtree(self.out.parent, ignore_errors=True)
        print(f"\nBroker, sampled by py-spy through the last round ({total} samples at 50 Hz):")
        for title, counts in (("inclusive", inclusive), ("own", own)):
            print(f"  {title}:")
            for frame, n in sorted(counts.items(), key=lambda kv: -kv[1])[:top]:
                print(f"    {n / max(total, 1):6.1%}  {frame})")


def run(bootstrap: str, scale: Any, cycles: int, profile: int, baseline: Path | None,
        broker_pid: int) -> None:
    import psycopg

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
        steady(bootstrap, scale, cycles, profile, broker_pid, children, figures)
        table(figures)
    finally:
        for c in children:
            c.close()
        with psycopg.connect(POSTGRES_URL, autocommit=True) as server:
            for database in databases:
                server.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        for directory in scratch:
            shutil.rmtree(directory, ignore_errors=True)


def steady(bootstrap: str, scale: Any, cycles: int, profile: int, broker_pid: int,
           children: list[Child], figures: dict[str, dict[str, list[float]]]) -> None:
    """Steady cycles, each collector in turn after the same traffic; the last profiled."""
    from bench.controlcenter_bench import traffic

    for i in range(cycles):
        traffic(bootstrap, scale, i)
        last = i == cycles - 1
        spy = BrokerSampler(broker_pid) if last and profile else None
        for c in children:
            answer = c.cycle(profile if last else 0)
            figures[c.name].setdefault("steady cycle", []).append(answer["took"])
            figures[c.name].setdefault("cycle + pushes sent", []).append(
                answer["took"] + answer["phases"].get("pushes after", 0.0))
            for phase, seconds in answer["phases"].items():
                figures[c.name].setdefault(f"  {phase}", []).append(seconds)
            for phase, seconds in answer.get("cpu", {}).items():
                figures[c.name].setdefault(f"cpu {phase}", []).append(seconds)
            show(c.name, f"steady {i + 1}", answer)
            if "profile" in answer:
                print(answer["profile"])
        if spy is not None:
            spy.report(profile)


def list_offsets_paths(bootstrap: str, rounds: int = 7) -> None:
    """Wall and CPU seconds (this process, all threads) for the end offsets of every
    partition, turn about: librdkafka with a future per partition (AdminClient.list_offsets,
    the path before issue 24), librdkafka with one future for the answer (the path before
    this round, `batched_offsets=False`), and one ListOffsets per leader over clusterclient's
    own connections (ClusterClient.list_offsets now)."""
    from confluent_kafka import TopicPartition as KafkaTopicPartition
    from confluent_kafka.admin import OffsetSpec

    from clusterclient import LATEST, ClusterClient, TopicPartition

    client = ClusterClient(bootstrap, {"client.id": "bench-list-offsets"}, timeout=60.0)
    librdkafka = ClusterClient(bootstrap, {"client.id": "bench-list-offsets"}, timeout=60.0,
                               batched_offsets=False)
    partitions = [(p.topic, p.partition) for p in client.metadata(refresh=True).partitions]
    queries = dict.fromkeys((TopicPartition(t, p) for t, p in partitions), LATEST)

    def per_partition_futures() -> int:
        futures = client.admin.list_offsets(
            {KafkaTopicPartition(t, p): OffsetSpec.latest() for t, p in partitions},
            request_timeout=60.0)
        return sum(1 for f in futures.values() if f.result(70).offset >= 0)

    def one_future() -> int:
        return len(librdkafka.list_offsets(queries).offsets)

    def own_connections() -> int:
        return len(client.list_offsets(queries).offsets)

    paths = {"librdkafka, a future per partition": per_partition_futures,
             "librdkafka, one future (before)": one_future,
             "own connections (now)": own_connections}
    wall: dict[str, list[float]] = {name: [] for name in paths}
    cpu: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(rounds):
        for name, path in paths.items():
            started, cpu_started = time.perf_counter(), time.process_time()
            answered = path()
            wall[name].append(time.perf_counter() - started)
            cpu[name].append(time.process_time() - cpu_started)
            assert answered == len(partitions), (name, answered, len(partitions))
    print(f"\nListOffsets (latest) for {len(partitions)} partitions, median of {rounds}, "
          "turn about (CPU: this process, all threads):")
    for name in paths:
        print(f"  {name:36} {statistics.median(wall[name]):7.3f} s (min {min(wall[name]):.3f})"
              f"   CPU {statistics.median(cpu[name]):7.3f} s")
    now, before = "own connections (now)", "librdkafka, one future (before)"
    print(f"  now/before: wall {statistics.median(wall[now]) / statistics.median(wall[before]):.2f}"
          f", CPU {statistics.median(cpu[now]) / statistics.median(cpu[before]):.2f}")
    client.close()
    librdkafka.close()


def made_up_readings(topics: int, partitions: int, groups: int) -> Any:
    """Readings of the bench's scale made up in process (no broker): each moves a tenth of
    the topics on by one message per partition, and the groups on them that keep up (three
    in four) commit it; the rest lag, as `traffic` does on the real cluster."""
    from clusterclient import Broker, ClusterMetadata, ConsumerGroup, GroupState, TopicPartition
    from clusterclient.metadata import PartitionMetadata, TopicMetadata
    from controlcenter.collector.sampler import Reading

    names = [f"t{t:04}" for t in range(topics)]
    meta = ClusterMetadata("bench", 1, (Broker(1, "127.0.0.1", 9092),), {
        n: TopicMetadata(n, False, tuple(PartitionMetadata(n, p, 1, (1,), (1,))
                                         for p in range(partitions))) for n in names})
    ends = {TopicPartition(n, p): 100 for n in names for p in range(partitions)}
    described = {f"g{g:04}": ConsumerGroup(f"g{g:04}", False, GroupState.EMPTY, "", None, ())
                 for g in range(groups)}
    committed = {g: {TopicPartition(names[i % topics], p): 90 for p in range(partitions)}
                 for i, g in enumerate(described)}
    at = time.time()
    for round_ in itertools.count():
        at += INTERVAL
        busy = {names[(round_ * (topics // 10) + i) % topics] for i in range(topics // 10)}
        for tp in ends:
            if tp.topic in busy:
                ends[tp] += 1
        for i, g in enumerate(described):
            if names[i % topics] in busy and i % 4:
                committed[g] = {tp: ends[tp] for tp in committed[g]}
        yield Reading(at=at, metadata=meta, log_start=dict.fromkeys(ends, 0),
                      log_end=dict(ends), groups=described,
                      committed={g: dict(c) for g, c in committed.items()}, min_isr={})


def analyze_child(repo: str, topics: int, partitions: int, groups: int) -> None:
    """The analyze phase alone (CPU seconds), in process, on made-up readings of the bench's
    scale (no broker, no database; `made_up_readings`): each `cycle` line answers the
    seconds of Analyzer.analyze plus the two detect steps (the collector's `analyze`) and of
    encoding the lag samples (`history`)."""
    sys.path.insert(0, repo)
    from controlcenter.collector import detect
    from controlcenter.collector.analysis import Analyzer
    from laganalysis import records

    analyzer, previous, published = Analyzer(), None, None
    readings = made_up_readings(topics, partitions, groups)
    print(json.dumps({"ready": True}), flush=True)
    for _ in sys.stdin:
        reading = next(readings)
        started = time.process_time()  # CPU seconds: the machine's load moves wall time more
        snap = analyzer.analyze(reading)
        detect.cluster_events(previous, snap)
        detect.live_changes(published, snap)
        analyzed = time.process_time()
        encode = getattr(records, "encode_lag_samples", None)
        if encode is not None:
            encode(snap.lag_samples)
        else:
            for sample in snap.lag_samples:
                records.encode_lag_sample(sample)
        encoded = time.process_time()
        previous = published = snap
        print(json.dumps({"analyze": analyzed - started, "encode": encoded - analyzed,
                          "samples": len(snap.lag_samples)}), flush=True)


def write_child(repo: str, topics: int, partitions: int, groups: int) -> None:
    """The analyze and write phases, in process, on made-up readings (`made_up_readings`)
    into the read model in the database DATABASE_URL names: a `cycle` line answers the CPU
    seconds of each (analyze as the collector's: Analyzer.analyze and the two detect
    steps) and the write's wall seconds (PostgreSQL works in its own process); `profile N`
    also the write's N functions with the most cumulative time."""
    import cProfile
    import io
    import pstats

    sys.path.insert(0, repo)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "millrace.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from controlcenter import clusters
    from controlcenter.collector import detect
    from controlcenter.collector.analysis import Analyzer
    from controlcenter.collector.store import Store
    from laganalysis.retention import DEFAULT_POLICY

    call_command("migrate", verbosity=0)
    analyzer, store, published = Analyzer(), Store("bench:9092", DEFAULT_POLICY), None
    readings = made_up_readings(topics, partitions, groups)
    print(json.dumps({"ready": True}), flush=True)
    with clusters.using(clusters.current_name()):
        for line in sys.stdin:
            command, _, arg = line.strip().partition(" ")
            reading = next(readings)
            cpu = time.process_time()
            snap = analyzer.analyze(reading)
            events = detect.cluster_events(store.previous, snap)
            detect.live_changes(published, snap)
            analyzed = time.process_time() - cpu
            profiler = cProfile.Profile() if command == "profile" else None
            if profiler is not None:
                profiler.enable()
            wall, cpu = time.perf_counter(), time.process_time()
            store.write(snap, analyzed, INTERVAL, events)
            answer: dict[str, Any] = {"analyze": analyzed,
                                      "write": time.perf_counter() - wall,
                                      "write cpu": time.process_time() - cpu}
            if profiler is not None:
                profiler.disable()
                out = io.StringIO()
                pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(
                    int(arg or 25))
                answer["profile"] = out.getvalue()
            published = snap
            print(json.dumps(answer), flush=True)


def turn_about(children: dict[str, subprocess.Popen[str]],
               times: dict[str, dict[str, list[float]]], rounds: int, profile: int) -> None:
    """`rounds` + 1 cycles of each child in turn into `times`; the first is not counted
    (every row new), the last is profiled with `profile`."""
    for proc in children.values():
        assert proc.stdout is not None
        json.loads(proc.stdout.readline())
    for round_ in range(rounds + 1):
        last = round_ == rounds
        for name, proc in children.items():
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(f"profile {profile}\n" if last and profile else "cycle\n")
            proc.stdin.flush()
            answer = json.loads(proc.stdout.readline())
            for phase in times[name]:
                if round_:
                    times[name][phase].append(answer[phase])
            if "profile" in answer:
                print(f"\n{name}, the write of the last round:\n{answer['profile']}")


def in_process_paths(baseline: Path, scale: Any, phases: tuple[str, ...], child: str,
                     rounds: int = 7, profile: int = 0) -> None:
    """This tree against the baseline, turn about, in children of `child`'s kind
    (`analyze_child`, or `write_child` with a PostgreSQL database each, dropped after);
    the first round (every row new) is not counted, the last is profiled with `profile`."""
    import psycopg

    names = ("this tree", "before")
    databases = [f"ccbench_{uuid.uuid4().hex[:10]}" for _ in names] if child == "write" else []
    scratch = [tempfile.mkdtemp(prefix="ccbench-db-") for _ in names]
    children = {}
    times: dict[str, dict[str, list[float]]] = {n: {p: [] for p in phases} for n in names}
    try:
        for i, (name, repo) in enumerate(zip(names, (REPO, baseline), strict=True)):
            env = {**os.environ, "MILLRACE_DATA_DIR": scratch[i]}
            if databases:
                with psycopg.connect(POSTGRES_URL, autocommit=True) as server:
                    server.execute(f'CREATE DATABASE "{databases[i]}"')
                env["DATABASE_URL"] = POSTGRES_URL.rsplit("/", 1)[0] + "/" + databases[i]
            children[name] = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), f"--{child}-child", str(repo),
                 str(scale.topics), str(scale.partitions), str(scale.groups)],
                cwd=repo, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        turn_about(children, times, rounds, profile)
    finally:
        for proc in children.values():
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(60)
        for database in databases:
            with psycopg.connect(POSTGRES_URL, autocommit=True) as server:
                server.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        for directory in scratch:
            shutil.rmtree(directory, ignore_errors=True)
    where = "into PostgreSQL" if databases else "no database"
    print(f"\nIn process ({scale.topics} topics x {scale.partitions} partitions, "
          f"{scale.groups} groups, made-up readings, {where}), seconds (analyze: CPU), "
          f"median of {rounds} steady cycles, turn about:")
    for phase in phases:
        now, before = (statistics.median(times[n][phase]) for n in names)
        print(f"  {phase:10} this tree {now:7.3f} s   before {before:7.3f} s   "
              f"now/before {now / before:.2f}")


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
    if sys.argv[1:2] == ["--analyze-child"]:
        analyze_child(sys.argv[2], *map(int, sys.argv[3:6]))
        return
    if sys.argv[1:2] == ["--write-child"]:
        write_child(sys.argv[2], *map(int, sys.argv[3:6]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--cycles", type=int, default=5)
    parser.add_argument("--profile", type=int, default=0, metavar="N")
    parser.add_argument("--paths-only", action="store_true",
                        help="only the ListOffsets paths, old against new (no collectors)")
    parser.add_argument("--analyze-only", action="store_true",
                        help="only the analyze phase in process, against --baseline "
                             "(no broker, no database)")
    parser.add_argument("--write-only", action="store_true",
                        help="only the analyze and write phases in process into PostgreSQL, "
                             "against --baseline (no broker)")
    parser.add_argument("--baseline", type=Path, metavar="DIR",
                        help="a checkout of an earlier commit (with this script copied into "
                             "its bench/): its collector runs side by side, as 'before'")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from bench.controlcenter_bench import Scale, create_scale
    from tests.brokerproc import BrokerProcess

    scale = Scale("large", args.topics, args.partitions, args.groups)
    if args.analyze_only or args.write_only:
        if args.baseline is None:
            parser.error("--analyze-only and --write-only compare against --baseline DIR")
        if args.analyze_only:
            in_process_paths(args.baseline, scale, ("analyze", "encode"), "analyze")
        if args.write_only:
            in_process_paths(args.baseline, scale, ("analyze", "write", "write cpu"), "write",
                             rounds=args.cycles, profile=args.profile)
        return
    data = Path(tempfile.mkdtemp(prefix="ccbench-broker-"))
    # A broker that misses its controller session under a loaded machine fences itself and
    # re-elects all 10,000 partitions (issue 24's first run here: minutes of no answers);
    # the bench measures the collector, so the session is long.
    broker = BrokerProcess(data, {"num.partitions": str(args.partitions),
                                  "broker.session.timeout.ms": "60000"})
    broker.start()
    try:
        started = time.perf_counter()
        create_scale(broker.bootstrap, scale)
        print(f"{args.topics} topics x {args.partitions} partitions, {args.groups} groups set "
              f"up in {time.perf_counter() - started:.0f} s", flush=True)
        if not args.paths_only:
            assert broker.proc is not None
            run(broker.bootstrap, scale, args.cycles, args.profile, args.baseline, broker.proc.pid)
        list_offsets_paths(broker.bootstrap)
    finally:
        broker.stop()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
