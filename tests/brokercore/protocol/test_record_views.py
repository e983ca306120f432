"""A Produce request's record sets decode as views of the request's own buffer
(`brokercore/protocol/record_views.py`), in every version the broker serves, and a record
set cut short by the end of the request decodes short, as the codec's copies did (the log
then refuses it with CORRUPT_MESSAGE, the connection stays open)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.protocol.producer import ProduceRequest

import brokercore.handlers  # noqa: F401  (the Produce handler sets the codec up)
from brokercore.handlers.registry import REGISTRY

PRODUCE = REGISTRY[0]
VERSIONS = range(PRODUCE.min_version, PRODUCE.max_version + 1)


def produce_request(record_sets: list[bytes | None]) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=None, acks=1, timeout_ms=5000,
        topic_data=[ProduceRequest.TopicProduceData(name="t", partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=i, records=records)
            for i, records in enumerate(record_sets)])])


@pytest.mark.parametrize("version", VERSIONS)
@given(record_sets=st.lists(st.one_of(st.none(), st.binary(max_size=300)), min_size=1,
                            max_size=4))
def test_record_sets_are_views_of_the_frame(version: int,
                                            record_sets: list[bytes | None]) -> None:
    frame = bytearray(produce_request(record_sets).encode(version=version))
    decoded = ProduceRequest.decode(memoryview(frame), version=version)
    partitions = decoded.topic_data[0].partition_data
    for records, sent in zip((p.records for p in partitions), record_sets, strict=True):
        if sent is None:
            assert records is None
            continue
        assert isinstance(records, memoryview)
        assert records.obj is frame and not records.readonly
        assert bytes(records) == sent


@pytest.mark.parametrize("version", [v for v in VERSIONS if v < 9])  # records end the frame
def test_a_record_set_cut_short_decodes_short(version: int) -> None:
    frame = produce_request([b"x" * 100]).encode(version=version)
    cut = memoryview(bytearray(frame))[:-40]
    records = ProduceRequest.decode(cut, version=version).topic_data[0].partition_data[0].records
    assert bytes(records) == b"x" * 60
