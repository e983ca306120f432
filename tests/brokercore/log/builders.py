"""Record batches for the log tests, built with kafka-python's client-side builder."""

from __future__ import annotations

import struct

from kafka.record.default_records import DefaultRecordBatchBuilder

from brokercore.log.records import RecordBatchHeader, decode_records, recompress_batch

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
CODECS = (NONE, GZIP, SNAPPY, LZ4, ZSTD)


def make_batch(
    values: list[bytes | None],
    *,
    keys: list[bytes | None] | None = None,
    timestamp: int = 1_700_000_000_000,
    timestamps: list[int] | None = None,
    codec: int = NONE,
    producer: tuple[int, int, int] = (-1, -1, -1),
) -> bytes:
    """One v2 batch as a client would send it (baseOffset 0). Codecs other than none are
    applied with cramjam, since kafka-python here lacks the snappy/lz4/zstd libraries."""
    builder = DefaultRecordBatchBuilder(2, NONE, False, *producer, 2**31 - 1)
    keys = keys or [None] * len(values)
    for delta, (key, value) in enumerate(zip(keys, values, strict=True)):
        ts = timestamps[delta] if timestamps else timestamp + delta
        builder.append(delta, ts, key, value, [])
    raw = bytes(builder.build())
    return raw if codec == NONE else recompress(raw, codec)


def recompress(raw: bytes, codec: int) -> bytes:
    return recompress_batch(raw, RecordBatchHeader.unpack(raw), codec)


def keyed(pairs: list[tuple[bytes, bytes | None]], **kwargs: object) -> bytes:
    return make_batch([v for _, v in pairs], keys=[k for k, _ in pairs], **kwargs)  # type: ignore[arg-type]


def offsets_in(data: bytes | memoryview) -> list[tuple[int, int]]:
    """(base_offset, last_offset) of each whole batch in a fetch response."""
    out, position, buf = [], 0, bytes(data)
    while position < len(buf):
        header = RecordBatchHeader.unpack(buf, position)
        out.append((header.base_offset, header.last_offset))
        position += header.size
    return out


def values_in(data: bytes | memoryview) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record, decoded with kafka-python's reader."""
    from kafka.record.default_records import DefaultRecordBatch

    out, position, buf = [], 0, bytes(data)
    while position < len(buf):
        header = RecordBatchHeader.unpack(buf, position)
        batch = buf[position : position + header.size]
        if header.codec in (NONE, GZIP):
            out += [(r.offset, r.key, r.value) for r in DefaultRecordBatch(batch)]
        else:
            out += [
                (header.base_offset + r.offset_delta, r.key, _value(r.raw))
                for r in decode_records(batch, header)
            ]
        position += header.size
    return out


def _value(raw: bytes) -> bytes | None:
    from kafka.record.default_records import DefaultRecordBatch

    fake = bytearray(61) + raw
    struct.pack_into(">qiib", fake, 0, 0, len(fake) - 12, 0, 2)
    struct.pack_into(">i", fake, 57, 1)
    record = next(iter(DefaultRecordBatch(bytes(fake))))
    return record.value  # type: ignore[no-any-return]
