"""The history topics' record encoding: round-trips, keys and clear errors on bad records."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from laganalysis.burrow import Status
from laganalysis.records import (
    ClusterEvent,
    EventKind,
    LagSample,
    RecordError,
    decode_cluster_event,
    decode_lag_sample,
    encode_cluster_event,
    encode_lag_sample,
)

names = st.text(min_size=1, max_size=30)  # quotes, backslashes, control characters too
offsets = st.integers(0, 2**62)

lag_samples = st.builds(
    LagSample,
    group=names,
    topic=names,
    partition=st.integers(0, 10_000),
    timestamp_ms=st.integers(0, 2**45),
    committed_offset=offsets,
    end_offset=offsets,
    lag=offsets,
    lag_seconds=st.none() | st.floats(0, 1e9),
    status=st.sampled_from(list(Status)),
)


@given(lag_samples)
def test_a_lag_sample_round_trips(sample: LagSample) -> None:
    key, value = encode_lag_sample(sample)
    assert decode_lag_sample(value) == sample
    assert json.loads(key) == [sample.group, sample.topic, sample.partition]


def dumped(obj: object) -> bytes:
    """The records' JSON as json.dumps writes it: what the readers were written against."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


@given(lag_samples, st.none() | st.floats() | st.integers(-(2**70), 2**70))
def test_a_lag_sample_encodes_to_the_bytes_json_dumps_writes(sample: LagSample,
                                                            seconds: float | None) -> None:
    sample = dataclasses.replace(sample, lag_seconds=seconds)
    key, value = encode_lag_sample(sample)
    assert key == dumped([sample.group, sample.topic, sample.partition])
    assert value == dumped({
        "v": 1, "group": sample.group, "topic": sample.topic, "partition": sample.partition,
        "ts": sample.timestamp_ms, "committed_offset": sample.committed_offset,
        "end_offset": sample.end_offset, "lag": sample.lag, "lag_seconds": seconds,
        "status": sample.status.name})


def test_a_lag_sample_is_plain_json_any_consumer_can_read() -> None:
    sample = LagSample("billing", "orders", 3, 1767225600000, 1200, 1500, 300, 12.5, Status.WARN)
    key, value = encode_lag_sample(sample)
    assert key == b'["billing","orders",3]'
    assert json.loads(value) == {
        "v": 1,
        "group": "billing",
        "topic": "orders",
        "partition": 3,
        "ts": 1767225600000,
        "committed_offset": 1200,
        "end_offset": 1500,
        "lag": 300,
        "lag_seconds": 12.5,
        "status": "WARN",
    }


@given(
    st.sampled_from(list(EventKind)),
    st.integers(0, 2**45),
    st.dictionaries(st.text(max_size=10), st.text(max_size=10), max_size=3),
)
def test_cluster_events_round_trip_keyed_by_their_subject(
    kind: EventKind, ts: int, detail: dict[str, str]
) -> None:
    events = [
        (ClusterEvent(kind, ts, group="g", detail=detail), ["group", "g"]),
        (ClusterEvent(kind, ts, topic="t", partition=2, broker=1), ["partition", "t", 2]),
        (ClusterEvent(kind, ts, broker=3), ["broker", 3]),
    ]
    for event, subject in events:
        key, value = encode_cluster_event(event)
        assert json.loads(key) == subject
        assert decode_cluster_event(value) == event


def test_an_event_about_nothing_is_refused() -> None:
    with pytest.raises(RecordError, match="names no"):
        encode_cluster_event(ClusterEvent(EventKind.BROKER_UP, 0))


@pytest.mark.parametrize(
    "value",
    [
        b"\xff\xfe",
        b"not json",
        b"[1, 2]",
        b'{"v": 2, "group": "g"}',
        b'{"v": 1, "group": "g"}',
        b'{"v": 1, "group": "g", "topic": "t", "partition": true, "ts": 0, "committed_offset": 0,'
        b' "end_offset": 0, "lag": 0, "lag_seconds": null, "status": "OK"}',
        b'{"v": 1, "group": "g", "topic": "t", "partition": 0, "ts": 0, "committed_offset": 0,'
        b' "end_offset": 0, "lag": 0, "lag_seconds": null, "status": "FINE"}',
    ],
)
def test_a_record_that_is_not_a_lag_sample_is_a_record_error(value: bytes) -> None:
    with pytest.raises(RecordError):
        decode_lag_sample(value)


def test_an_unknown_event_kind_is_a_record_error() -> None:
    with pytest.raises(RecordError, match="cluster event"):
        decode_cluster_event(b'{"v": 1, "kind": "meteor", "ts": 0}')
