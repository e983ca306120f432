"""The collector's group read: librdkafka's request per group against one per coordinator.

    python bench/group_reads_bench.py [--groups 200 --topics 100 --partitions 10
                                       --members 10 --rounds 7]

One built-in broker (`--brokers 3`: a cluster under `python -m brokercluster`, so the groups
spread over three coordinators) with `--topics` x `--partitions`, `--groups` groups that
committed offsets (each on one topic, every partition) and `--members` of them with a live
consumer. Two ClusterClients read them turn about, `--rounds` times: one on librdkafka's
admin API (`batched_groups=False`: a DescribeGroups per group, an OffsetFetch per group, all
in flight at once) and one batched (clusterclient/group_reads.py). Each round times
  - describe: `describe_groups` of every group,
  - offsets: `committed_offsets_many` of every group,
  - collector groups: the collector's own group read (`Sampler._groups`: ListGroups, then
    describe, then offsets; what runs beside the ListOffsets in its `read`),
  - collector read: the collector's whole `read` (Metadata, ListOffsets of every partition,
    the groups beside them);
and the table prints the medians and batched/per-group.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def set_up(bootstrap: str, topics: int, partitions: int, groups: int, members: int) -> list[Any]:
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic

    from clusterclient import ClusterClient, ClusterRequestError, TopicPartition

    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [f"gr-t{i:04d}" for i in range(topics)]
    for i in range(0, topics, 100):
        for future in admin.create_topics([NewTopic(n, partitions, 1)
                                           for n in names[i:i + 100]]).values():
            future.result(120)
    client = ClusterClient(bootstrap, timeout=30)
    for g in range(groups):
        topic = names[g % topics]
        for _ in range(100):  # NOT_COORDINATOR while __consumer_offsets is being created
            try:
                client.alter_group_offsets(f"gr-g{g:04d}", {TopicPartition(topic, p): g
                                                            for p in range(partitions)})
                break
            except ClusterRequestError:
                time.sleep(0.2)
    consumers = []
    for g in range(members):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"gr-g{g:04d}",
                             "enable.auto.commit": False})
        consumer.subscribe([names[g % topics]])
        consumers.append(consumer)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not all(c.assignment() for c in consumers):
        for c in consumers:
            c.poll(0.05)
    return consumers


def measure(bootstrap: str, groups: int, rounds: int) -> None:
    from clusterclient import ClusterClient
    from controlcenter.collector.sampler import Sampler

    ids = [f"gr-g{g:04d}" for g in range(groups)]
    clients = {"per group (librdkafka)": ClusterClient(bootstrap, timeout=30,
                                                       batched_groups=False),
               "per coordinator": ClusterClient(bootstrap, timeout=30)}
    samplers = {name: Sampler(c, None) for name, c in clients.items()}
    steps: dict[str, Callable[[str], object]] = {
        "describe": lambda name: clients[name].describe_groups(ids),
        "offsets": lambda name: clients[name].committed_offsets_many(ids),
        "collector groups": lambda name: samplers[name]._groups(),
        "collector read": lambda name: samplers[name].read(),
    }
    answers: dict[str, dict[str, object]] = {step: {} for step in steps}
    times: dict[str, dict[str, list[float]]] = {step: {n: [] for n in clients} for step in steps}
    for round_ in range(rounds + 1):  # the first round (connections, coordinators) not counted
        for step, run in steps.items():
            for name in clients:
                started = time.perf_counter()
                answer = run(name)
                took = time.perf_counter() - started
                if round_:
                    times[step][name].append(took)
                if step in ("describe", "offsets"):
                    answers[step][name] = answer
        for step in ("describe", "offsets"):
            first, second = answers[step].values()
            assert first == second, f"{step}: the two paths answered differently"
    print(f"\n{groups} groups, median of {rounds} rounds, turn about (seconds):")
    print(f"  {'':18}" + "".join(f"{n:>24}" for n in clients) + f"{'batched/per group':>20}")
    for step, by_name in times.items():
        before, now = (statistics.median(v) for v in by_name.values())
        print(f"  {step:18}{before:24.3f}{now:24.3f}{now / before:20.2f}")
    for sampler in samplers.values():
        sampler.close()
    for client in clients.values():
        client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--brokers", type=int, choices=(1, 3), default=1)
    args = parser.parse_args()
    from tests.brokerproc import BrokerProcess, ClusterProcess

    data = Path(tempfile.mkdtemp(prefix="group-reads-bench-"))
    if args.brokers == 1:
        cluster: Any = BrokerProcess(data, {"num.partitions": str(args.partitions)}).start()
    else:
        cluster = ClusterProcess(data).open()
    consumers: list[Any] = []
    try:
        started = time.perf_counter()
        consumers = set_up(cluster.bootstrap, args.topics, args.partitions, args.groups,
                           args.members)
        print(f"{args.topics} topics x {args.partitions} partitions, {args.groups} groups "
              f"({args.members} with a live member) on {args.brokers} broker(s), set up in "
              f"{time.perf_counter() - started:.0f} s", flush=True)
        measure(cluster.bootstrap, args.groups, args.rounds)
    finally:
        for consumer in consumers:
            consumer.close()
        cluster.stop() if args.brokers == 1 else cluster.close()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
