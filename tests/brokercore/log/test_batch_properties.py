"""Hypothesis properties of batch parsing, stamping and offset lookup, in every codec."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brokercore.clock import FakeClock
from brokercore.log import LogConfig, PartitionLog, RecordBatchHeader
from brokercore.log.records import (
    crc_ok,
    decode_records,
    iter_valid_batches,
    patch_offset_and_epoch,
)
from tests.brokercore.log.builders import CODECS, make_batch, offsets_in, values_in

values = st.lists(st.one_of(st.none(), st.binary(max_size=200)), min_size=1, max_size=20)
batch_specs = st.tuples(values, st.sampled_from(CODECS))


@settings(max_examples=60, deadline=None)
@given(spec=batch_specs, offset=st.integers(0, 2**62), epoch=st.integers(0, 2**31 - 1))
def test_stamping_offset_and_epoch_keeps_the_crc_and_records(
    spec: tuple[list[bytes | None], int], offset: int, epoch: int
) -> None:
    record_values, codec = spec
    batch = bytearray(make_batch(record_values, codec=codec))
    before = decode_records(batch, RecordBatchHeader.unpack(batch))
    patch_offset_and_epoch(batch, 0, offset, epoch)
    header = RecordBatchHeader.unpack(batch)
    assert (header.base_offset, header.partition_leader_epoch) == (offset, epoch)
    assert header.codec == codec
    assert crc_ok(batch, 0, header)
    assert header.records_count == len(record_values) == header.last_offset_delta + 1
    assert decode_records(batch, header) == before


@settings(max_examples=40, deadline=None)
@given(specs=st.lists(batch_specs, min_size=1, max_size=6), cut=st.integers(1, 60))
def test_scanning_a_torn_buffer_yields_exactly_the_whole_batches(
    specs: list[tuple[list[bytes | None], int]], cut: int
) -> None:
    batches = [make_batch(v, codec=c) for v, c in specs]
    buf = b"".join(batches)
    torn = buf[: len(buf) - cut]
    found = [header.size for _, header in iter_valid_batches(torn, 0, len(torn))]
    whole = []
    total = 0
    for batch in batches:
        if total + len(batch) <= len(torn):
            whole.append(len(batch))
            total += len(batch)
    assert found == whole


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    specs=st.lists(batch_specs, min_size=1, max_size=12),
    segment_bytes=st.integers(300, 4000),
    interval=st.integers(1, 2000),
    data=st.data(),
)
def test_any_offset_reads_back_the_batch_that_contains_it(
    specs: list[tuple[list[bytes | None], int]],
    segment_bytes: int,
    interval: int,
    data: st.DataObject,
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=interval)
        log = PartitionLog.open(Path(tmp) / "t-0", config, FakeClock())
        ranges, sent = [], []
        for record_values, codec in specs:
            result = log.append_as_leader(make_batch(record_values, codec=codec), 0)
            ranges.append((result.base_offset, result.last_offset))
            sent += record_values
        for _ in range(5):
            offset = data.draw(st.integers(0, log.log_end_offset - 1))
            fetched = log.read(offset, data.draw(st.integers(1, 5000)))
            got = offsets_in(fetched.records)
            assert got[0] == next(r for r in ranges if r[0] <= offset <= r[1])
            assert got == ranges[ranges.index(got[0]) : ranges.index(got[0]) + len(got)]
        if data.draw(st.booleans()):
            log.close()
            log = PartitionLog.open(Path(tmp) / "t-0", config, FakeClock())
        read_back: list[bytes | None] = []
        while len(read_back) < len(sent):
            read_back += [v for _, _, v in values_in(log.read(len(read_back), 1 << 20).records)]
        assert read_back == sent
        log.close()
