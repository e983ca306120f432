"""RecordBatch v2: header parsing, validation, in-place patching, and record decoding.

The log stores batches exactly as received, so almost everything here works on the
61-byte header alone. Records are decoded only where Kafka semantics need keys or
per-record timestamps: keys on compacted topics, the cleaner, and timestamp lookups.

Batch layout (big-endian)::

    0 baseOffset int64 | 8 batchLength int32 | 12 partitionLeaderEpoch int32 | 16 magic int8
    17 crc uint32 (CRC-32C of bytes 21..end) | 21 attributes int16 | 23 lastOffsetDelta int32
    27 baseTimestamp int64 | 35 maxTimestamp int64 | 43 producerId int64
    51 producerEpoch int16 | 53 baseSequence int32 | 57 recordsCount int32 | 61 records
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import NamedTuple

import cramjam
from crc32c import crc32c
from kafka.record.util import decode_varint, encode_varint

from brokercore.log.errors import (
    CorruptRecordError,
    InvalidRecordError,
    UnsupportedMessageFormatError,
)

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes batchLength does not count
CRC_START = 21
MAX_TIMESTAMP_AT = 35
ATTRIBUTES_AT = 21
RECORDS_COUNT_AT = 57
CODEC_MASK = 0x07
LOG_APPEND_TIME_FLAG = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
NO_PRODUCER_ID = -1
INT32_MAX = 2147483647
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024

Buffer = bytes | bytearray | memoryview
Writable = bytearray | memoryview  # a record set the leader stamps in place


@dataclass(frozen=True, slots=True)
class RecordBatchHeader:
    """The fixed 61-byte header of one v2 batch, as found at ``position`` in a buffer."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @classmethod
    def unpack(cls, buf: Buffer, position: int = 0) -> RecordBatchHeader:
        return cls(*HEADER.unpack_from(buf, position))

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & LOG_APPEND_TIME_FLAG)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        return sequence_add(self.base_sequence, self.last_offset_delta)


def sequence_add(sequence: int, delta: int) -> int:
    """Producer sequences wrap from int32 max back to 0, as in Kafka."""
    return (sequence + delta) % (INT32_MAX + 1)


def read_header(buf: Buffer, position: int, end: int) -> RecordBatchHeader:
    """Parse and structurally check the batch at ``position``; the CRC is checked apart."""
    if end - position < 17:
        raise CorruptRecordError(f"truncated batch header at {position}")
    magic = buf[position + 16]
    if magic != 2:
        raise UnsupportedMessageFormatError(f"magic {magic} at {position}; only v2 is stored")
    if end - position < HEADER_SIZE:
        raise CorruptRecordError(f"truncated batch header at {position}")
    header = RecordBatchHeader.unpack(buf, position)
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or position + header.size > end:
        raise CorruptRecordError(f"batch length {header.batch_length} at {position} overruns")
    if header.last_offset_delta < 0:
        raise CorruptRecordError(f"negative lastOffsetDelta at {position}")
    return header


def crc_ok(buf: Buffer, position: int, header: RecordBatchHeader) -> bool:
    view = memoryview(buf)[position + CRC_START : position + header.size]
    return bool(crc32c(view) == header.crc)


def iter_valid_batches(
    buf: Buffer, start: int, end: int
) -> Iterator[tuple[int, RecordBatchHeader]]:
    """Yield (position, header) for each whole, CRC-valid batch; stop at the first bad one."""
    position = start
    while position < end:
        try:
            header = read_header(buf, position, end)
        except (CorruptRecordError, UnsupportedMessageFormatError):
            return
        if not crc_ok(buf, position, header):
            return
        yield position, header
        position += header.size


def patch_offset_and_epoch(buf: Writable, position: int, base_offset: int, epoch: int) -> None:
    """Stamp baseOffset and partitionLeaderEpoch; both lie before the CRC'd range."""
    _INT64.pack_into(buf, position, base_offset)
    _INT32.pack_into(buf, position + 12, epoch)


def stamp_log_append_time(
    buf: Writable, position: int, header: RecordBatchHeader, now: int
) -> None:
    """LogAppendTime topics: the broker's clock becomes maxTimestamp, so the CRC changes."""
    struct.pack_into(">h", buf, position + ATTRIBUTES_AT, header.attributes | LOG_APPEND_TIME_FLAG)
    struct.pack_into(">q", buf, position + MAX_TIMESTAMP_AT, now)
    _restamp_crc(buf, position, header.size)


def stamp_batch(
    buf: Writable, position: int, header: RecordBatchHeader, base_offset: int, epoch: int,
    log_append_time: int | None,
) -> RecordBatchHeader:
    """A leader's stamps on a batch it appends: its offset and leader epoch, and on a
    LogAppendTime topic the broker's time (not on control batches). The stamped header."""
    patch_offset_and_epoch(buf, position, base_offset, epoch)
    header = replace(header, base_offset=base_offset, partition_leader_epoch=epoch)
    if log_append_time is not None and not header.is_control:
        stamp_log_append_time(buf, position, header, log_append_time)
        header = RecordBatchHeader.unpack(buf, position)
    return header


def _restamp_crc(buf: Writable, position: int, size: int) -> None:
    crc = crc32c(memoryview(buf)[position + CRC_START : position + size])
    struct.pack_into(">I", buf, position + 17, crc)


class Record(NamedTuple):
    """One decoded record: enough for compaction, key checks and timestamp lookups."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    is_tombstone: bool
    raw: bytes  # the record's exact encoding, length prefix included


def decompress(codec: int, data: Buffer) -> bytes:
    if codec == 0:
        return bytes(data)
    if codec == 1:
        return bytes(cramjam.gzip.decompress(bytes(data)))
    if codec == 2:
        return _snappy_decompress(bytes(data))
    if codec == 3:
        return bytes(cramjam.lz4.decompress(bytes(data)))
    if codec == 4:
        return bytes(cramjam.zstd.decompress(bytes(data)))
    raise CorruptRecordError(f"unknown compression codec {codec}")


def compress(codec: int, data: bytes) -> bytes:
    if codec == 0:
        return data
    if codec == 1:
        return bytes(cramjam.gzip.compress(data))
    if codec == 2:
        return _snappy_compress(data)
    if codec == 3:
        compressor = cramjam.lz4.Compressor(block_linked=False)
        compressor.compress(data)
        return bytes(compressor.finish())
    if codec == 4:
        return bytes(cramjam.zstd.compress(data))
    raise CorruptRecordError(f"unknown compression codec {codec}")


def _snappy_decompress(data: bytes) -> bytes:
    """Java clients frame snappy the xerial way; others send one raw block."""
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    out = bytearray()
    position = len(_XERIAL_HEADER)
    while position < len(data):
        (length,) = struct.unpack_from(">i", data, position)
        block = data[position + 4 : position + 4 + length]
        out += bytes(cramjam.snappy.decompress_raw(block))
        position += 4 + length
    return bytes(out)


def _snappy_compress(data: bytes) -> bytes:
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
        out += struct.pack(">i", len(block)) + block
    return bytes(out)


def decode_records(batch: Buffer, header: RecordBatchHeader) -> list[Record]:
    """Decode the records of one whole batch (``batch`` starts at its baseOffset)."""
    try:
        body = decompress(header.codec, memoryview(batch)[HEADER_SIZE : header.size])
        records = []
        position = 0
        for _ in range(header.records_count):
            record, position = _decode_record(body, position)
            records.append(record)
    except (ValueError, IndexError, cramjam.DecompressionError) as exc:
        raise CorruptRecordError(f"undecodable records: {exc}") from exc
    return records


def _decode_record(body: bytes, start: int) -> tuple[Record, int]:
    length, position = decode_varint(body, start)
    end = position + length
    if length < 0 or end > len(body):
        raise ValueError("record overruns its batch")
    position += 1  # attributes, unused in v2
    timestamp_delta, position = decode_varint(body, position)
    offset_delta, position = decode_varint(body, position)
    key_length, position = decode_varint(body, position)
    key = None if key_length < 0 else body[position : position + key_length]
    position += max(key_length, 0)
    value_length, _ = decode_varint(body, position)
    raw = body[start:end]
    return Record(offset_delta, timestamp_delta, key, value_length < 0, raw), end


def require_keys(batch: Buffer, header: RecordBatchHeader) -> None:
    """Compacted topics reject keyless records (Kafka: INVALID_RECORD)."""
    for record in decode_records(batch, header):
        if record.key is None:
            raise InvalidRecordError("compacted topic records must have a key")


def rebuild_batch(
    batch: Buffer, header: RecordBatchHeader, records: list[Record], codec: int | None = None
) -> bytes:
    """A copy of ``batch`` holding only ``records``, in ``codec`` (None: the same codec).

    baseOffset, lastOffsetDelta, timestamps and the producer fields are kept, so each
    record's stored deltas stay valid and producer state survives compaction and
    recompression (Kafka preserves the same fields for the same reason).
    """
    codec = header.codec if codec is None else codec
    body = compress(codec, b"".join(record.raw for record in records))
    out = bytearray(batch[:HEADER_SIZE])
    out += body
    struct.pack_into(">i", out, 8, len(out) - LOG_OVERHEAD)
    struct.pack_into(">h", out, ATTRIBUTES_AT, (header.attributes & ~CODEC_MASK) | codec)
    struct.pack_into(">i", out, RECORDS_COUNT_AT, len(records))
    _restamp_crc(out, 0, len(out))
    return bytes(out)


def recompress_batch(batch: Buffer, header: RecordBatchHeader, codec: int) -> bytes:
    """The batch with its records re-encoded in ``codec`` (a topic's `compression.type`)."""
    return rebuild_batch(batch, header, decode_records(batch, header), codec)


def encode_record(
    offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None
) -> bytes:
    """Encode one record body (no headers); used by tests and tools that build batches."""
    body = bytearray(b"\x00")
    encode_varint(timestamp_delta, body.append)
    encode_varint(offset_delta, body.append)
    for part in (key, value):
        if part is None:
            encode_varint(-1, body.append)
        else:
            encode_varint(len(part), body.append)
            body += part
    encode_varint(0, body.append)
    out = bytearray()
    encode_varint(len(body), out.append)
    return bytes(out + body)
