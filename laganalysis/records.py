"""The internal history topics the collector appends to and the Spark jobs read.

``_millrace-lag-samples``: one record per group/topic/partition per collector cycle. Key: the
JSON array ``["group", "topic", partition]``, so one partition's history stays in order in one
Kafka partition. Value: a JSON object (``LAG_SAMPLE_DDL`` is its Spark schema)::

    {"v": 1, "group": "billing", "topic": "orders", "partition": 3, "ts": 1767225600000,
     "committed_offset": 1200, "end_offset": 1500, "lag": 300, "lag_seconds": 12.5,
     "status": "WARN"}

``_millrace-cluster-events``: what changed in the cluster. Key: the event's subject,
``["group", name]``, ``["partition", topic, partition]`` or ``["broker", id]``. Value::

    {"v": 1, "kind": "leader_change", "ts": 1767225600000, "group": null,
     "topic": "orders", "partition": 3, "broker": 2, "detail": {"from": 1, "to": 2}}

Timestamps are milliseconds since the epoch, as Kafka's are. JSON rather than Avro so that any
consumer (kcat, a notebook, Spark's ``from_json``) reads them without a registry.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from laganalysis.burrow import Status

LAG_SAMPLES_TOPIC = "_millrace-lag-samples"
CLUSTER_EVENTS_TOPIC = "_millrace-cluster-events"
# Written by the lag-anomaly stream query (laganalysis/alertstream.py), not the collector.
LAG_ALERTS_TOPIC = "_millrace-lag-alerts"
SCHEMA_VERSION = 1

# Settings the collector creates the topics with: a week of history, like the default
# retention policy's longest tier, and more partitions for the busier samples topic.
TOPIC_SETTINGS: Mapping[str, tuple[int, Mapping[str, str]]] = {
    LAG_SAMPLES_TOPIC: (6, {"cleanup.policy": "delete", "retention.ms": str(7 * 86400 * 1000)}),
    CLUSTER_EVENTS_TOPIC: (1, {"cleanup.policy": "delete", "retention.ms": str(7 * 86400 * 1000)}),
}
LAG_ALERTS_SETTINGS: tuple[int, Mapping[str, str]] = (
    1, {"cleanup.policy": "delete", "retention.ms": str(7 * 86400 * 1000)})

LAG_SAMPLE_DDL = (
    "v INT, `group` STRING, topic STRING, partition INT, ts LONG, committed_offset LONG, "
    "end_offset LONG, lag LONG, lag_seconds DOUBLE, status STRING"
)
CLUSTER_EVENT_DDL = (
    "v INT, kind STRING, ts LONG, `group` STRING, topic STRING, partition INT, broker INT, "
    "detail MAP<STRING, STRING>"
)

LAG_ALERT_DDL = (
    "v INT, `group` STRING, topic STRING, ts LONG, state STRING, lag LONG, mean DOUBLE, "
    "stddev DOUBLE, threshold DOUBLE"
)


class RecordError(ValueError):
    """A history record that is not what this module writes."""


class EventKind(Enum):
    REBALANCE = "rebalance"  # a group's generation changed
    LEADER_CHANGE = "leader_change"
    UNDER_REPLICATED = "under_replicated"  # a partition's ISR fell below its replicas
    REPLICATED = "replicated"  # ... and is full again
    BROKER_UP = "broker_up"
    BROKER_DOWN = "broker_down"


@dataclass(frozen=True, slots=True)
class LagSample:
    group: str
    topic: str
    partition: int
    timestamp_ms: int
    committed_offset: int
    end_offset: int
    lag: int
    lag_seconds: float | None
    status: Status

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.group, self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    kind: EventKind
    timestamp_ms: int
    group: str | None = None
    topic: str | None = None
    partition: int | None = None
    broker: int | None = None
    detail: Mapping[str, str] = field(default_factory=dict)

    @property
    def subject(self) -> list[str | int]:
        if self.group is not None:
            return ["group", self.group]
        if self.topic is not None and self.partition is not None:
            return ["partition", self.topic, self.partition]
        if self.broker is not None:
            return ["broker", self.broker]
        raise RecordError(f"a {self.kind.value} event names no group, partition or broker")


def encode_lag_sample(sample: LagSample) -> tuple[bytes, bytes]:
    """(key, value) bytes for ``_millrace-lag-samples``.

    The collector writes one per partition and cycle (10,000 a cycle at 1,000 groups of ten
    partitions), so the JSON is formatted directly rather than through ``json.dumps``; the
    bytes are the same as ``_json`` of the same list and object (tests/laganalysis/
    test_records.py compares them, bench/records_bench.py measures the difference)."""
    group, topic = _json_string(sample.group), _json_string(sample.topic)
    partition = int.__repr__(sample.partition)
    key = f"[{group},{topic},{partition}]"
    value = (
        f'{{"v":{SCHEMA_VERSION},"group":{group},"topic":{topic},"partition":{partition},'
        f'"ts":{int.__repr__(sample.timestamp_ms)},'
        f'"committed_offset":{int.__repr__(sample.committed_offset)},'
        f'"end_offset":{int.__repr__(sample.end_offset)},"lag":{int.__repr__(sample.lag)},'
        f'"lag_seconds":{_json_number(sample.lag_seconds)},"status":"{sample.status.name}"}}'
    )
    return key.encode(), value.encode()


# Group and topic names repeat every cycle: each is escaped once.
_json_string = functools.lru_cache(maxsize=65536)(json.encoder.encode_basestring)


def _json_number(value: float | None) -> str:
    """What ``json.dumps`` writes for None, an int or a float (NaN and infinities too)."""
    if value is None:
        return "null"
    if isinstance(value, int):
        return int.__repr__(value)
    if value != value:
        return "NaN"
    if value in (math.inf, -math.inf):
        return "Infinity" if value > 0 else "-Infinity"
    return float.__repr__(value)


def decode_lag_sample(value: bytes) -> LagSample:
    obj = _object(value)
    try:
        seconds = obj["lag_seconds"]
        return LagSample(
            group=_typed(obj, "group", str),
            topic=_typed(obj, "topic", str),
            partition=_typed(obj, "partition", int),
            timestamp_ms=_typed(obj, "ts", int),
            committed_offset=_typed(obj, "committed_offset", int),
            end_offset=_typed(obj, "end_offset", int),
            lag=_typed(obj, "lag", int),
            lag_seconds=None if seconds is None else float(seconds),
            status=Status[_typed(obj, "status", str)],
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise RecordError(f"not a lag sample: {exc}") from exc


def encode_cluster_event(event: ClusterEvent) -> tuple[bytes, bytes]:
    """(key, value) bytes for ``_millrace-cluster-events``."""
    value = {
        "v": SCHEMA_VERSION,
        "kind": event.kind.value,
        "ts": event.timestamp_ms,
        "group": event.group,
        "topic": event.topic,
        "partition": event.partition,
        "broker": event.broker,
        "detail": {str(k): str(v) for k, v in event.detail.items()},
    }
    return _json(event.subject), _json(value)


def decode_cluster_event(value: bytes) -> ClusterEvent:
    obj = _object(value)
    try:
        detail = obj.get("detail") or {}
        if not isinstance(detail, dict):
            raise TypeError("detail is not an object")
        return ClusterEvent(
            kind=EventKind(_typed(obj, "kind", str)),
            timestamp_ms=_typed(obj, "ts", int),
            group=_optional(obj, "group", str),
            topic=_optional(obj, "topic", str),
            partition=_optional(obj, "partition", int),
            broker=_optional(obj, "broker", int),
            detail={str(k): str(v) for k, v in detail.items()},
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise RecordError(f"not a cluster event: {exc}") from exc


@dataclass(frozen=True, slots=True)
class LagAlertRecord:
    """One record of ``_millrace-lag-alerts`` (laganalysis/lagbaseline.py: an edge, RAISED
    or CLEARED, of a group's lag on a topic against its rolling baseline). Key:
    ``["group", "topic"]``."""

    group: str
    topic: str
    timestamp_ms: int
    state: str
    lag: int
    mean: float
    stddev: float
    threshold: float


def decode_lag_alert(value: bytes) -> LagAlertRecord:
    obj = _object(value)
    try:
        state = _typed(obj, "state", str)
        if state not in ("RAISED", "CLEARED"):
            raise ValueError(f"state {state!r}")
        return LagAlertRecord(
            group=_typed(obj, "group", str), topic=_typed(obj, "topic", str),
            timestamp_ms=_typed(obj, "ts", int), state=state, lag=_typed(obj, "lag", int),
            mean=float(obj["mean"]), stddev=float(obj["stddev"]),
            threshold=float(obj["threshold"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise RecordError(f"not a lag alert: {exc}") from exc


def _json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def _object(value: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(value)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RecordError(f"not JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise RecordError("not a JSON object")
    if obj.get("v") != SCHEMA_VERSION:
        raise RecordError(f"unknown record version {obj.get('v')!r}")
    return obj


def _typed(obj: Mapping[str, Any], name: str, kind: type) -> Any:
    value = obj[name]
    # bool is an int in Python; a JSON true is not an offset.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeError(f"{name} is {type(value).__name__}, not {kind.__name__}")
    return value


def _optional(obj: Mapping[str, Any], name: str, kind: type) -> Any:
    return None if obj.get(name) is None else _typed(obj, name, kind)
