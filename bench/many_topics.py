"""One CreateTopics naming many topics on a 3-broker cluster: this tree against an older one.

    git archive 729fe75 | tar -x -C /tmp/before     # before topics were batched per proposal
    .venv/bin/python bench/many_topics.py --before /tmp/before

For each tree, in alternating rounds, it starts `python -m brokercluster` (3 brokers, so
every metadata proposal is a Raft round trip to a majority and an fsync on each voter),
sends one CreateTopics with `--topics` topics of one partition and replication factor 3
through confluent-kafka's AdminClient, and reports:

how long until it was answered. That includes each broker opening its replicas' logs,
and the time the active controller spends proposing the topics' records under its lock,
where every other metadata change (an ISR change, a fencing, an election) waits.

Without `--before` it measures this tree only.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from brokercluster.ports import free_base_port

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import trees

BROKERS = 3


def create_many(bootstrap: str, topics: int) -> float:
    """Seconds from sending the one CreateTopics until every topic's answer is in."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.list_topics(timeout=30)  # connected before the clock starts
    started = time.monotonic()
    futures = admin.create_topics([NewTopic(f"many-{i}", 1, BROKERS) for i in range(topics)],
                                  operation_timeout=300, request_timeout=300)
    for future in futures.values():
        future.result()
    return time.monotonic() - started


def measure(tree: Path, topics: int) -> float:
    with tempfile.TemporaryDirectory(prefix="many-topics-") as tmp:
        base_port = free_base_port(BROKERS)
        proc = trees.start(tree, ["-m", "brokercluster", "--brokers", str(BROKERS),
                                  "--base-port", str(base_port), "--data-dir",
                                  f"{tmp}/cluster"],
                           Path(tmp) / "cluster.out", b"millrace cluster ready", 120)
        try:
            return create_many(",".join(f"127.0.0.1:{base_port + i}" for i in range(BROKERS)),
                               topics)
        finally:
            trees.stop(proc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, help="a source tree of the code to compare to")
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    runs = trees.alternate(
        trees.trees(args.before), args.rounds, lambda tree: measure(tree, args.topics),
        lambda round_, name, seconds: print(f"round {round_} {name:6}: {args.topics} topics "
                                            f"answered in {seconds:6.2f} s", flush=True))
    medians = {name: statistics.median(r) for name, r in runs.items()}
    print(f"\n{args.topics} topics in one CreateTopics, {BROKERS} brokers, "
          f"median of {args.rounds} rounds")
    for name, seconds in medians.items():
        print(f"{name:6}: {seconds:6.2f} s")
    if "before" in medians:
        print(f"after/before: {medians['after'] / medians['before']:.3f}")


if __name__ == "__main__":
    main()
