"""The collector's lag-sample encoding (`laganalysis.records.encode_lag_sample`) for one
cycle at 1,000 groups of 10 partitions, against the same records through `json.dumps` (what
it did before, and what its bytes still equal), in interleaved rounds of one run.

    .venv/bin/python bench/records_bench.py [--groups 1000] [--partitions 10] [--rounds 7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

from laganalysis.burrow import Status
from laganalysis.records import LagSample, encode_lag_sample


def with_json_dumps(sample: LagSample) -> tuple[bytes, bytes]:
    def dumped(obj: object) -> bytes:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()

    return dumped(list(sample.key)), dumped({
        "v": 1, "group": sample.group, "topic": sample.topic, "partition": sample.partition,
        "ts": sample.timestamp_ms, "committed_offset": sample.committed_offset,
        "end_offset": sample.end_offset, "lag": sample.lag, "lag_seconds": sample.lag_seconds,
        "status": sample.status.name})


def cycle(groups: int, partitions: int, now_ms: int) -> list[LagSample]:
    statuses = list(Status)
    return [LagSample(f"group-{g:04}", f"topic-{g % 100:03}", p, now_ms, 1_000_000 + g * p,
                      1_000_500 + g * p, 500 + p, None if p == 0 else 0.25 * g + p,
                      statuses[(g + p) % len(statuses)])
            for g in range(groups) for p in range(partitions)]


def seconds(encode: Callable[[LagSample], tuple[bytes, bytes]],
            samples: list[LagSample]) -> float:
    started = time.perf_counter()
    for sample in samples:
        encode(sample)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    now_ms = int(time.time() * 1000)
    ours, reference = [], []
    for round_ in range(args.rounds):
        # A new cycle's timestamps and lags, the same groups and topics: as the collector sees.
        samples = cycle(args.groups, args.partitions, now_ms + round_ * 5000)
        assert all(encode_lag_sample(s) == with_json_dumps(s) for s in samples[:1000])
        ours.append(seconds(encode_lag_sample, samples))
        reference.append(seconds(with_json_dumps, samples))
    mine, theirs = statistics.median(ours), statistics.median(reference)
    print(f"{len(samples):,} lag samples a cycle, median of {args.rounds} interleaved rounds")
    print(f"  encode_lag_sample       {mine * 1000:8.1f} ms")
    print(f"  through json.dumps      {theirs * 1000:8.1f} ms")
    print(f"  ratio (ours/json.dumps) {mine / theirs:8.2f}")


if __name__ == "__main__":
    main()
