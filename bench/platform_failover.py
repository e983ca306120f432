"""What a user of `make run` sees after `cluster kill N`: the pause in acknowledgements, and
how long after `cluster start N` preferred leadership is back, with Kafka's broker defaults
and with the platform's settings (millrace/platform_cluster.py), side by side in one run.

A producer like `manage.py failover_demo` (idempotent, acks=all, 200 msg/s over 3 partitions
of an RF=3, min.insync.replicas=2 topic) runs throughout. For each kill the pause is the
longest gap between two acknowledgements from the kill until acknowledgements have resumed on
every partition; the return is the time from the restarted broker being ready until every
partition is led by its preferred replica (capped at --return-cap seconds). The machine is
noisy: compare the ratio of one run, not absolute figures across runs.

    .venv/bin/python bench/platform_failover.py [--kills 2]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import confluent_kafka

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from millrace.platform_cluster import broker_config
from tests.brokerproc import ClusterProcess
from tests.cluster.faults import ClusterView
from tests.cluster.workload import create_topic

TOPIC = "failover-demo"
RATE = 200.0


class Acks:
    """A failover_demo-like producer; the monotonic time of every acknowledgement."""

    def __init__(self, bootstrap: str) -> None:
        self.times: list[float] = []
        self.stop = threading.Event()
        self.producer = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 5, "log_level": 2})
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _delivered(self, err: object, _msg: object) -> None:
        if err is None:
            self.times.append(time.monotonic())

    def _run(self) -> None:
        sent, started = 0, time.monotonic()
        while not self.stop.is_set():
            while sent < (time.monotonic() - started) * RATE:
                try:
                    self.producer.produce(TOPIC, b"x", partition=sent % 3,
                                          on_delivery=self._delivered)
                except BufferError:
                    break
                sent += 1
            self.producer.poll(0.005)
        self.producer.flush(30)

    def pause_after(self, moment: float, settle: float = 3.0) -> float:
        """The longest gap between acknowledgements after `moment`, once they flow again."""
        while True:
            after = [t for t in self.times if t > moment]
            if after and time.monotonic() - after[-1] < 0.5 and after[-1] - moment > settle:
                break
            time.sleep(0.1)
        points = [moment, *after]
        return max(b - a for a, b in itertools.pairwise(points))

    def close(self) -> None:
        self.stop.set()
        self.thread.join(60)


def preferred_back(view: ClusterView, cap: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < cap:
        parts = view.partitions(TOPIC)
        if parts and all(p.leader == p.replicas[0] for p in parts.values()):
            return time.monotonic() - started
        time.sleep(0.2)
    return cap


def measure(name: str, overrides: dict[str, str], kills: int, cap: float,
            tmp: Path) -> tuple[list[float], list[float]]:
    pauses, returns = [], []
    with ClusterProcess(tmp / name.replace(" ", "-"), brokers=3, overrides=overrides) as cluster:
        view = ClusterView(cluster.bootstrap)
        create_topic(cluster.bootstrap, TOPIC, 3, 3, {"min.insync.replicas": "2"})
        view.fully_replicated(TOPIC)
        acks = Acks(cluster.bootstrap)
        time.sleep(2)
        for kill in range(kills):
            victim = 1 + kill % 3
            killed_at = time.monotonic()
            cluster.kill(victim)
            pauses.append(acks.pause_after(killed_at))
            cluster.start(victim)
            view.fully_replicated(TOPIC)
            returns.append(preferred_back(view, cap))
        acks.close()
    return pauses, returns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=2)
    parser.add_argument("--return-cap", type=float, default=30.0)
    args = parser.parse_args()
    kafka = {k: v for k, v in broker_config(3).items()
             if k in ("default.replication.factor", "offsets.topic.replication.factor",
                      "min.insync.replicas")}
    configs = {"Kafka defaults": kafka, "platform": broker_config(3)}
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, overrides in configs.items():
            results[name] = measure(name, overrides, args.kills, args.return_cap, Path(tmp))
    print(f"3 brokers, {args.kills} kill -9 of one broker each, producer at {RATE:g} msg/s")
    for name, (pauses, returns) in results.items():
        print(f"  {name:15} ack pause median {statistics.median(pauses):5.1f} s "
              f"(max {max(pauses):4.1f})   preferred leaders back after restart median "
              f"{statistics.median(returns):5.1f} s (cap {args.return_cap:g})")
    ratio = statistics.median(results["platform"][0]) / statistics.median(
        results["Kafka defaults"][0])
    print(f"ratio (same run): ack pause platform / Kafka defaults {ratio:.2f}")


if __name__ == "__main__":
    main()
