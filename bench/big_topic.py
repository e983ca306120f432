"""Creating a 1,000-partition topic on a lone broker: this tree against an older one, side by side.

    git archive 449792f | tar -x -C /tmp/before     # the code before issue 14's fix
    .venv/bin/python bench/big_topic.py --before /tmp/before

For each tree, in alternating rounds, it starts `python -m brokercore` from that tree
(Kafka's defaults: a 9 s broker session), creates one topic of `--partitions` partitions
with confluent-kafka's AdminClient and produces one record (acks=1) to every partition. It
reports:

- creation time: from the CreateTopics request until it is answered, and until every
  partition has acked a record;
- the longest event-loop stall, seen from outside: a second connection sends ApiVersions
  back to back during the whole run, and the slowest answer is how long the broker's one
  event loop was busy elsewhere;
- how often the broker fenced itself (its controller's "fencing broker" lines).

Without `--before` it measures this tree only.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.metadata import ApiVersionsRequest

from brokercluster.ports import free_port

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import trees


@dataclass(frozen=True)
class Run:
    answered_s: float  # CreateTopics answered
    create_s: float  # and every partition acked a record
    stall_s: float
    fenced: int


class StallProbe(threading.Thread):
    """ApiVersions back to back on its own connection; the slowest answer wins."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.longest = 0.0
        self.stopping = threading.Event()

    def run(self) -> None:
        correlation_id = 0
        while not self.stopping.is_set():
            correlation_id += 1
            request = ApiVersionsRequest()
            request.with_header(correlation_id=correlation_id, client_id="stall-probe")
            started = time.monotonic()
            self.sock.sendall(bytes(request.encode(version=0, header=True, framed=True)))
            (size,) = struct.unpack(">i", self._read(4))
            self._read(size)
            self.longest = max(self.longest, time.monotonic() - started)
            time.sleep(0.005)

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("the broker closed the probe's connection")
            data += chunk
        return data

    def stop(self) -> float:
        self.stopping.set()
        self.join(60)
        self.sock.close()
        return self.longest


def start_broker(tree: Path, data: Path) -> tuple[subprocess.Popen[bytes], int, Path]:
    port = free_port()
    output = data / "broker.out"
    proc = trees.start(tree, ["-m", "brokercore", "--override", "node.id=1",
                              "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                              "--override", f"log.dirs={data / 'logs'}"],
                       output, b"ready on", 60)
    return proc, port, output


def create_and_produce(bootstrap: str, partitions: int) -> float:
    """The topic, then one record (acks=1) into each partition; the clients end with it.
    Returns when CreateTopics was answered (monotonic seconds)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic("big", partitions, 1)],
                                      request_timeout=300).values():
        future.result()
    answered = time.monotonic()
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": 1,
                                         "linger.ms": 5, "message.timeout.ms": 300000})
    for index in range(partitions):
        producer.produce("big", b"x", partition=index)
        producer.poll(0)
    if producer.flush(300):
        raise RuntimeError("records were not acked")
    return answered


def measure(tree: Path, partitions: int) -> Run:
    with tempfile.TemporaryDirectory(prefix="big-topic-") as tmp:
        proc, port, output = start_broker(tree, Path(tmp))
        try:
            probe = StallProbe(port)
            probe.start()
            started = time.monotonic()
            answered_s = create_and_produce(f"127.0.0.1:{port}", partitions) - started
            create_s = time.monotonic() - started
            stall_s = probe.stop()
        finally:
            trees.stop(proc)
        return Run(answered_s, create_s, stall_s, output.read_text().count("fencing broker"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, help="a source tree of the code to compare to")
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    def show(round_: int, name: str, run: Run) -> None:
        print(f"round {round_} {name:6}: answered {run.answered_s:6.2f} s, every "
              f"partition acked {run.create_s:6.2f} s, longest stall {run.stall_s:6.2f} s, "
              f"fenced {run.fenced}", flush=True)

    runs = trees.alternate(trees.trees(args.before), args.rounds,
                           lambda tree: measure(tree, args.partitions), show)
    medians = {name: (statistics.median(r.create_s for r in rs),
                      statistics.median(r.stall_s for r in rs), sum(r.fenced for r in rs))
               for name, rs in runs.items()}
    print(f"\n{args.partitions} partitions, median of {args.rounds} rounds")
    for name, (create_s, stall_s, fenced) in medians.items():
        print(f"{name:6}: create {create_s:6.2f} s, longest stall {stall_s:6.2f} s, "
              f"fenced {fenced} time(s) in all")
    if "before" in medians:
        after, before = medians["after"], medians["before"]
        print(f"after/before: creation {after[0] / before[0]:.3f}, "
              f"longest stall {after[1] / before[1]:.3f}")


if __name__ == "__main__":
    main()
