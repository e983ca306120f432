"""The broker's ListOffsets answer at 10,000 partitions: per-partition codec objects against
positional tuples.

    python bench/list_offsets_bench.py [--topics 10 --partitions 1000 --rounds 7]
                                       [--before DIR]

In process: the answer the handler builds for `--topics` x `--partitions` partitions, built
and encoded as kafka-python's per-partition `ListOffsetsPartitionResponse` objects (the
handler until now) and as the positional tuples the codec also takes (the handler now),
turn about; the bytes are checked equal. CPU seconds, medians, now/before.

With `--before DIR` (an older tree, e.g. `git archive <commit> | tar -x -C DIR`), also over
the wire: a broker of this tree and one of DIR, each with `--topics` x `--partitions`,
answer a ListOffsets v10 (latest) of every partition, turn about (the request sent over
clusterclient's own connection, wire.py), wall seconds, now/before.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def codec(topics: int, partitions: int, rounds: int) -> None:
    from kafka.protocol.consumer import ListOffsetsResponse

    topic_class = ListOffsetsResponse.ListOffsetsTopicResponse
    partition_class = topic_class.ListOffsetsPartitionResponse
    names = [f"t{t:04d}" for t in range(topics)]

    def objects() -> bytes:
        return bytes(ListOffsetsResponse(throttle_time_ms=0, topics=[
            topic_class(name=n, partitions=[
                partition_class(partition_index=p, error_code=0, old_style_offsets=[],
                                timestamp=-1, offset=100 + p, leader_epoch=3)
                for p in range(partitions)]) for n in names]).encode(version=10))

    def tuples() -> bytes:
        return bytes(ListOffsetsResponse(throttle_time_ms=0, topics=[
            (n, [(p, 0, -1, 100 + p, 3) for p in range(partitions)])
            for n in names]).encode(version=10))

    times: dict[str, list[float]] = {"objects (before)": [], "tuples (now)": []}
    answers = {}
    for round_ in range(rounds + 1):  # the first (the codec compiling its encoder) not counted
        for name, build in zip(times, (objects, tuples), strict=True):
            started = time.process_time()
            answers[name] = build()
            if round_:
                times[name].append(time.process_time() - started)
        assert len(set(answers.values())) == 1, "the two answers encode differently"
    report(f"ListOffsets v10 answer of {topics * partitions} partitions built and encoded in "
           f"process, CPU seconds", times, rounds)


def wire(before: Path, topics: int, partitions: int, rounds: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse

    from clusterclient.wire import Connection
    from tests.brokerproc import BrokerProcess

    data = Path(tempfile.mkdtemp(prefix="list-offsets-bench-"))
    brokers = {"before": BrokerProcess(data / "before", tree=before),
               "now": BrokerProcess(data / "now")}
    request_topic = ListOffsetsRequest.ListOffsetsTopic
    request_partition = request_topic.ListOffsetsPartition
    try:
        connections = {}
        for name, broker in brokers.items():
            broker.start(120)
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            for t in range(topics):  # a topic a request: 10,000 partitions outlast one
                for future in admin.create_topics([NewTopic(f"t{t:04d}", partitions, 1)],
                                                  operation_timeout=600,
                                                  request_timeout=600).values():
                    future.result(900)
            connections[name] = Connection("127.0.0.1", broker.port, {}, 120.0)
        request = ListOffsetsRequest(replica_id=-1, isolation_level=0, timeout_ms=0, topics=[
            request_topic(name=f"t{t:04d}", partitions=[
                request_partition(partition_index=p, current_leader_epoch=-1, timestamp=-1)
                for p in range(partitions)]) for t in range(topics)])
        times: dict[str, list[float]] = {"before": [], "now": []}
        for round_ in range(rounds + 1):
            for name, connection in connections.items():
                started = time.perf_counter()
                answer = connection.call(request, ListOffsetsResponse, 10)
                if round_:
                    times[name].append(time.perf_counter() - started)
                assert sum(p.error_code == 0 for t in answer.topics for p in t.partitions) == (
                    topics * partitions), (name, "not every partition answered")
        report(f"ListOffsets v10 (latest) of {topics * partitions} partitions over the wire, "
               "wall seconds", times, rounds)
    finally:
        for broker in brokers.values():
            broker.stop()
        shutil.rmtree(data, ignore_errors=True)


def report(title: str, times: dict[str, list[float]], rounds: int) -> None:
    print(f"\n{title}, median of {rounds}, turn about:")
    for name, values in times.items():
        print(f"  {name:20} {statistics.median(values):8.3f} s   (min {min(values):.3f})")
    before, now = (statistics.median(v) for v in times.values())
    print(f"  now/before {now / before:.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--before", type=Path, metavar="DIR")
    args = parser.parse_args()
    codec(args.topics, args.partitions, args.rounds)
    if args.before is not None:
        wire(args.before, args.topics, args.partitions, args.rounds)


if __name__ == "__main__":
    main()
