"""How lag history is thinned as it ages, so storage stays flat however long the platform runs.

A :class:`Policy` is a list of tiers by age: points younger than the first tier's ``max_age``
keep its resolution, and so on; points older than the last tier are dropped. The default keeps
every point for an hour and one point per minute for a week. Buckets are aligned to multiples
of the resolution since the epoch, so thinning again later finds the same buckets: applying a
plan twice changes nothing the second time.

The functions here only decide. :func:`plan` says which stored rows to drop and which to merge
(the storage owner does it); :func:`downsample` applies a policy to in-memory lag samples.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Generic, TypeVar

from laganalysis.records import LagSample

K = TypeVar("K", bound=Hashable)

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_SPAN = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")


@dataclass(frozen=True, slots=True)
class Tier:
    max_age: float  # seconds
    resolution: float  # seconds between kept points; 0 keeps every point


@dataclass(frozen=True, slots=True)
class Policy:
    tiers: tuple[Tier, ...]

    def __post_init__(self) -> None:
        if not self.tiers:
            raise ValueError("a retention policy needs at least one tier")
        ages = [t.max_age for t in self.tiers]
        if any(a <= 0 for a in ages) or ages != sorted(set(ages)):
            raise ValueError("tier ages must be positive and strictly increasing")
        if any(t.resolution < 0 for t in self.tiers):
            raise ValueError("a tier's resolution must not be negative")

    @classmethod
    def parse(cls, text: str) -> Policy:
        """``"1h=raw,7d=1m"``: each tier as AGE=RESOLUTION, units s/m/h/d/w, ``raw`` = all."""
        tiers = []
        for part in text.split(","):
            age, sep, resolution = part.partition("=")
            if not sep:
                raise ValueError(f"retention tier {part.strip()!r} is not AGE=RESOLUTION")
            raw = resolution.strip() == "raw"
            tiers.append(Tier(_seconds(age), 0.0 if raw else _seconds(resolution)))
        return cls(tuple(tiers))

    def bucket(self, timestamp: float, now: float) -> float | None:
        """The bucket a point falls in now (its own time at full resolution); None: drop it."""
        age = now - timestamp
        for tier in self.tiers:
            if age < tier.max_age:
                if tier.resolution == 0:
                    return timestamp
                return (timestamp // tier.resolution) * tier.resolution
        return None


DEFAULT_POLICY = Policy((Tier(3600.0, 0.0), Tier(7 * 86400.0, 60.0)))


@dataclass(frozen=True, slots=True)
class Merge(Generic[K]):
    bucket: float
    keys: tuple[K, ...]


@dataclass(frozen=True, slots=True)
class Plan(Generic[K]):
    drop: list[K] = field(default_factory=list)
    merge: list[Merge[K]] = field(default_factory=list)


def plan(rows: Iterable[tuple[K, float]], now: float, policy: Policy = DEFAULT_POLICY) -> Plan[K]:
    """Rows of one series as (key, timestamp): which to drop, which to merge per bucket."""
    result: Plan[K] = Plan()
    buckets: dict[float, list[K]] = defaultdict(list)
    for key, timestamp in rows:
        bucket = policy.bucket(timestamp, now)
        if bucket is None:
            result.drop.append(key)
        else:
            buckets[bucket].append(key)
    for bucket, keys in sorted(buckets.items()):
        if len(keys) > 1:
            result.merge.append(Merge(bucket, tuple(keys)))
    return result


def downsample(
    samples: Iterable[LagSample], now: float, policy: Policy = DEFAULT_POLICY
) -> list[LagSample]:
    """Samples of any partitions thinned by the policy, oldest first per partition."""
    buckets: dict[tuple[str, str, int, float], list[LagSample]] = defaultdict(list)
    for sample in samples:
        bucket = policy.bucket(sample.timestamp_ms / 1000, now)
        if bucket is not None:
            buckets[(*sample.key, bucket)].append(sample)
    return [
        merge_samples(group, bucket) if len(group) > 1 else group[0]
        for (*_, bucket), group in sorted(buckets.items())
    ]


def merge_samples(samples: Sequence[LagSample], bucket: float) -> LagSample:
    """One sample for a bucket: the newest offsets, the worst lag and status seen in it."""
    newest = max(samples, key=lambda s: s.timestamp_ms)
    seconds = [s.lag_seconds for s in samples if s.lag_seconds is not None]
    return replace(
        newest,
        timestamp_ms=int(bucket * 1000),
        lag=max(s.lag for s in samples),
        lag_seconds=max(seconds) if seconds else None,
        status=max((s.status for s in samples), key=lambda st: st.value),
    )


def _seconds(text: str) -> float:
    match = _SPAN.match(text)
    if not match:
        raise ValueError(f"{text.strip()!r} is not a span like 30s, 5m, 1h, 7d or 2w")
    return float(int(match.group(1)) * _UNITS[match.group(2)])
