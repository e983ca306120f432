"""A REST proxy consumer instance draining a full topic: librdkafka's fetch-queue backoff.

The proxy's v2 fetch takes up to 2,000 ready records from its consumer (waiting up to the
request's timeout only when none are ready) and spends some milliseconds presenting them.
librdkafka keeps `queued.min.messages` (100,000) records ready, and once it has them it
postpones the partition's next fetch by `fetch.queue.backoff.ms`, 1,000 ms by default. A
reader that drains 100,000 records in less than that finds the queue empty and waits for
the fetch that the backoff still holds back: its slowest requests take hundreds of ms.

In one run, against one built-in broker (`python -m brokercore`, a fresh log dir) and one
partition of `--records` 100-byte records, a consumer reading as the proxy does, with a
new group from the beginning each round, for `--seconds`:
  (a) librdkafka's default backoff (what the proxy's instances had),
  (b) `fetch.queue.backoff.ms` as restproxy/instances/instance.py sets it,
in interleaved rounds. It prints requests/s and records/s, p50/p99/max request time, and
the ratios (b)/(a). Compare ratios, not absolute times: the machine is noisy.

    .venv/bin/python bench/fetch_backoff.py [--records 2000000] [--seconds 4] [--rounds 3]
                                            [--work-ms 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "millrace.settings")
import django

django.setup()  # the proxy's consumer settings are read from the restproxy package
from bench.http_bench import fill_topic  # noqa: E402
from restproxy.instances.instance import IDLE_BUFFER_LIMIT, InstanceConfig  # noqa: E402
from tests.brokerproc import BrokerProcess  # noqa: E402

TOPIC = "drained"


@dataclass
class Round:
    requests_per_s: float
    records_per_s: float
    p50_ms: float
    p99_ms: float
    max_ms: float


def drain(bootstrap: str, backoff_ms: int | None, seconds: float, work_s: float) -> Round:
    """Requests as the proxy serves them: wait for a first record, take what is ready up to
    IDLE_BUFFER_LIMIT, then spend `work_s` presenting them."""
    config = {**InstanceConfig(auto_offset_reset="earliest").consumer_config(
        f"bench-{uuid.uuid4().hex[:8]}", "bench"), "bootstrap.servers": bootstrap}
    if backoff_ms is None:
        del config["fetch.queue.backoff.ms"]
    else:
        config["fetch.queue.backoff.ms"] = backoff_ms
    consumer = Consumer(config)
    consumer.subscribe([TOPIC])
    while consumer.poll(1.0) is None:  # joined, assigned and fetching
        pass
    times: list[float] = []
    records = 0
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        begun = time.monotonic()
        first = consumer.poll(1.0)
        if first is None:  # a whole second without a record: the topic is read to its end
            sys.exit("the topic ran out of records: give --records more than the rounds read")
        taken = [first, *consumer.consume(IDLE_BUFFER_LIMIT - 1, 0)]
        time.sleep(work_s)
        times.append(time.monotonic() - begun)
        records += len(taken)
    elapsed = time.monotonic() - started
    consumer.close()
    ordered = sorted(times)
    return Round(len(times) / elapsed, records / elapsed, statistics.median(ordered) * 1000,
                 ordered[int(len(ordered) * 0.99)] * 1000, ordered[-1] * 1000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work-ms", type=float, default=10.0,
                        help="time spent presenting each request's records")
    args = parser.parse_args()
    ours = InstanceConfig().consumer_config("g", "c")["fetch.queue.backoff.ms"]
    with tempfile.TemporaryDirectory(prefix="fetch-backoff-") as tmp:
        broker = BrokerProcess(Path(tmp), {"num.partitions": "1"}).start()
        try:
            fill_topic(broker.bootstrap, TOPIC, args.records)
            sides: dict[str, list[Round]] = {"default": [], "ours": []}
            for n in range(args.rounds):
                order = [("default", None), ("ours", ours)]
                for name, backoff in order[::-1] if n % 2 else order:
                    result = drain(broker.bootstrap, backoff, args.seconds, args.work_ms / 1000)
                    sides[name].append(result)
                    print(f"  round {n + 1} {name}: {result.records_per_s:,.0f} records/s, "
                          f"p99 {result.p99_ms:.1f} ms, max {result.max_ms:.1f} ms", flush=True)
        finally:
            broker.stop()
    median = {name: Round(*(statistics.median(getattr(r, f) for r in rounds)
                            for f in Round.__dataclass_fields__))
              for name, rounds in sides.items()}
    print(f"\nmedians of {args.rounds} rounds of {args.seconds:.0f} s, {args.work_ms:g} ms of "
          "work a request\n\n| fetch.queue.backoff.ms | requests/s | records/s | p50 ms "
          "| p99 ms | max ms |\n|---|---|---|---|---|---|")
    for name, label in (("default", "librdkafka's default (1000)"), ("ours", str(ours))):
        r = median[name]
        print(f"| {label} | {r.requests_per_s:,.0f} | {r.records_per_s:,.0f} | "
              f"{r.p50_ms:.1f} | {r.p99_ms:.1f} | {r.max_ms:.1f} |")
    a, b = median["default"], median["ours"]
    print(f"\nratio ours/default: records/s {b.records_per_s / a.records_per_s:.2f}, "
          f"p99 {b.p99_ms / a.p99_ms:.2f}, max {b.max_ms / a.max_ms:.2f}")


if __name__ == "__main__":
    main()
