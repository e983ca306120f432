"""Checks a record set must pass before any of it is written (all or nothing), and the
codec conversion a topic's `compression.type` asks of a leader's appends."""

from __future__ import annotations

from brokercore.log.config import LogConfig
from brokercore.log.errors import CorruptRecordError, InvalidRecordError, RecordTooLargeError
from brokercore.log.records import (
    Buffer,
    RecordBatchHeader,
    Writable,
    crc_ok,
    read_header,
    recompress_batch,
    require_keys,
)
from brokercore.log.segment import FoundBatch


def validate_record_set(
    buf: Buffer, config: LogConfig, *, from_leader: bool = False
) -> list[FoundBatch]:
    """Every batch of a Produce (or replicated) record set, validated, in order.

    Checks only the header and CRC, except on compacted topics where client batches
    are decoded to reject keyless records. Raises the first ``LogError`` found.
    """
    if not buf:
        raise InvalidRecordError("empty record set")
    batches = []
    position, end = 0, len(buf)
    while position < end:
        header = read_header(buf, position, end)
        if not from_leader and header.size > config.max_message_bytes:
            raise RecordTooLargeError(
                f"batch of {header.size} bytes exceeds max.message.bytes {config.max_message_bytes}"
            )
        if not crc_ok(buf, position, header):
            raise CorruptRecordError(f"CRC mismatch in batch at byte {position}")
        if not from_leader:
            _check_client_batch(buf, position, header, config)
        batches.append(FoundBatch(position, header))
        position += header.size
    return batches


def check_follower_offsets(batches: list[FoundBatch], log_end_offset: int) -> None:
    """A follower keeps the leader's offsets: they may skip ahead of its log end (a compacted
    leader has gaps) but never go back."""
    expected = log_end_offset
    for found in batches:
        if found.header.base_offset < expected:
            raise InvalidRecordError(
                f"follower append at {found.header.base_offset} below expected {expected}"
            )
        expected = found.header.next_offset


def _check_client_batch(
    buf: Buffer, position: int, header: RecordBatchHeader, config: LogConfig
) -> None:
    if header.records_count <= 0 or header.last_offset_delta != header.records_count - 1:
        raise InvalidRecordError(
            f"batch has {header.records_count} records, lastOffsetDelta {header.last_offset_delta}"
        )
    if header.is_control:
        raise InvalidRecordError("clients may not produce control batches")
    if config.compact:
        require_keys(memoryview(buf)[position : position + header.size], header)


def with_topic_codec(
    buf: Writable, batches: list[FoundBatch], config: LogConfig
) -> tuple[Writable, list[FoundBatch]]:
    """The record set with every batch in the topic's codec (Kafka's broker-side
    `compression.type`); the same objects, untouched, when the topic keeps the
    producer's codec or every batch already has it.

    Offsets, timestamps, headers and producer id, epoch and sequence are kept: only the
    records' encoding changes. The recompressed batch must still fit `max.message.bytes`.
    """
    codec = config.codec
    if codec is None or all(found.header.codec == codec for found in batches):
        return buf, batches
    out: bytearray = bytearray()
    converted = []
    for found in batches:
        header = found.header
        batch = memoryview(buf)[found.position : found.position + header.size]
        if header.codec != codec:
            batch = memoryview(recompress_batch(batch, header, codec))
            header = RecordBatchHeader.unpack(batch)
            if header.size > config.max_message_bytes:
                raise RecordTooLargeError(
                    f"batch of {header.size} bytes in {config.compression_type} exceeds "
                    f"max.message.bytes {config.max_message_bytes}"
                )
        converted.append(FoundBatch(len(out), header))
        out += batch
    return out, converted
