"""A topic's `compression.type`: the leader stores every batch in the topic's codec."""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from brokercore.log import RecordTooLargeError
from brokercore.log.records import RecordBatchHeader, decode_records
from tests.brokercore.log.builders import CODECS, GZIP, LZ4, NONE, SNAPPY, ZSTD, recompress
from tests.brokercore.log.conftest import OpenLog

TYPES = {NONE: "uncompressed", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
PRODUCER = (7000, 3, 40)  # producer id, epoch, base sequence


def batch_with_headers(codec: int, count: int = 5, sequence: int = PRODUCER[2]) -> bytes:
    builder = DefaultRecordBatchBuilder(2, NONE, False, *PRODUCER[:2], sequence, 2**31 - 1)
    for delta in range(count):
        builder.append(delta, 1_700_000_000_000 + 7 * delta, f"k{delta}".encode(),
                       f"value-{delta}-".encode() * 20, [("trace", f"t{delta}".encode())])
    raw = bytes(builder.build())
    return raw if codec == NONE else recompress(raw, codec)


def stored(log: object) -> list[tuple[RecordBatchHeader, bytes]]:
    data = bytes(log.read(0, 1 << 20).records)  # type: ignore[attr-defined]
    out, position = [], 0
    while position < len(data):
        header = RecordBatchHeader.unpack(data, position)
        out.append((header, data[position : position + header.size]))
        position += header.size
    return out


def readable(batch: bytes) -> list[tuple[int, int, bytes | None, bytes | None, list[object]]]:
    """What a client sees, in kafka-python's reader (which inflates gzip itself)."""
    header = RecordBatchHeader.unpack(batch)
    plain = batch if header.codec in (NONE, GZIP) else recompress(batch, NONE)
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers))
            for r in DefaultRecordBatch(plain)]


@pytest.mark.parametrize("sent", CODECS)
@pytest.mark.parametrize("wanted", CODECS)
def test_every_batch_is_stored_in_the_topic_codec_with_its_records_intact(
    open_log: OpenLog, sent: int, wanted: int,
) -> None:
    reference = open_log(compression_type="producer")
    reference.append_as_leader(batch_with_headers(sent), leader_epoch=0)
    expected = readable(stored(reference)[0][1])
    reference.delete()

    log = open_log(compression_type=TYPES[wanted])
    log.append_as_leader(b"".join([batch_with_headers(sent), batch_with_headers(sent, 5, 45)]),
                         leader_epoch=2)
    batches = stored(log)
    assert [h.codec for h, _ in batches] == [wanted, wanted]
    first, batch = batches[0]
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == PRODUCER
    assert (first.base_offset, first.last_offset, first.records_count) == (0, 4, 5)
    assert first.partition_leader_epoch == 2
    assert readable(batch) == expected
    assert [r[0] for r in readable(batches[1][1])] == [5, 6, 7, 8, 9]


def test_a_batch_already_in_the_topic_codec_is_stored_byte_for_byte(open_log: OpenLog) -> None:
    log = open_log(compression_type="lz4")
    sent = batch_with_headers(LZ4)
    log.append_as_leader(sent, leader_epoch=0)
    (_header, batch), = stored(log)
    assert batch == sent  # baseOffset 0 and epoch 0 were stamped over the same values


def test_producer_keeps_each_batch_as_sent(open_log: OpenLog) -> None:
    log = open_log()
    sent = [batch_with_headers(codec, 5, 40 + 5 * codec) for codec in CODECS]
    log.append_as_leader(b"".join(sent), leader_epoch=0)
    assert [h.codec for h, _ in stored(log)] == list(CODECS)


def test_an_idempotent_retry_of_a_recompressed_batch_is_a_duplicate(open_log: OpenLog) -> None:
    log = open_log(compression_type="zstd")
    first = log.append_as_leader(batch_with_headers(NONE), leader_epoch=0)
    retry = log.append_as_leader(batch_with_headers(NONE), leader_epoch=0)
    assert retry.duplicate and retry.base_offset == first.base_offset
    assert log.log_end_offset == 5


def test_a_batch_too_large_once_recompressed_is_refused_whole(open_log: OpenLog) -> None:
    sent = batch_with_headers(ZSTD, count=50)
    log = open_log(compression_type="uncompressed", max_message_bytes=len(sent) + 10)
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(sent, leader_epoch=0)
    assert log.log_end_offset == 0


def test_a_changed_codec_applies_to_later_appends_only(open_log: OpenLog) -> None:
    from brokercore.log import LogConfig

    log = open_log(compression_type="gzip")
    log.append_as_leader(batch_with_headers(NONE), leader_epoch=0)
    log.update_config(LogConfig(compression_type="snappy"))
    log.append_as_leader(batch_with_headers(NONE, 5, 45), leader_epoch=0)
    assert [h.codec for h, _ in stored(log)] == [GZIP, SNAPPY]
    records = [decode_records(b, h) for h, b in stored(log)]
    assert [len(r) for r in records] == [5, 5]
