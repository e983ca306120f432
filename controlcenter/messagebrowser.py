"""Browsing a topic's messages: which offsets to read, the filters, and the downloads.

A `MessageQuery` says where to look (one partition or all; the newest, from the beginning,
from an offset or from a time), how many messages to show and what they must match. It
becomes one bounded read through clusterclient's `RecordReader`: without filters, `limit`
records per partition; with filters, a scan of at most `SCAN_LIMIT` records in all, so a
filter that matches nothing costs a bounded read, never the whole topic. Filters run on
the decoded text (an Avro value is matched on its JSON), case-insensitively.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from clusterclient.records import ConsumedRecord, RecordReader
from controlcenter.messagecodec import Decoder, Rendered

NEWEST, OLDEST, OFFSET, TIMESTAMP = "newest", "oldest", "offset", "timestamp"
STARTS = (NEWEST, OLDEST, OFFSET, TIMESTAMP)
MAX_LIMIT = 500
SCAN_LIMIT = 5000
MAX_BYTES = 16 << 20


@dataclass(frozen=True)
class MessageQuery:
    topic: str
    partition: int | None = None  # None: every partition
    start: str = NEWEST
    offset: int | None = None
    timestamp: dt.datetime | None = None
    limit: int = 50
    key: str = ""
    value: str = ""
    header: str = ""  # "name" or "name=value"

    @property
    def filtered(self) -> bool:
        return bool(self.key or self.value or self.header)

    def matches(self, message: BrowsedMessage) -> bool:
        if self.key and self.key.lower() not in message.key.text.lower():
            return False
        if self.value and self.value.lower() not in message.value.text.lower():
            return False
        if self.header:
            name, _, wanted = self.header.partition("=")
            return any(k == name.strip() and wanted.lower() in v.text.lower()
                       for k, v in message.headers)
        return True


@dataclass(frozen=True)
class BrowsedMessage:
    partition: int
    offset: int
    timestamp: dt.datetime | None
    timestamp_type: str
    key: Rendered
    value: Rendered
    headers: tuple[tuple[str, Rendered], ...]
    size: int

    def as_json(self) -> dict[str, Any]:
        return {
            "partition": self.partition, "offset": self.offset,
            "timestamp": self.timestamp.isoformat() if self.timestamp else None,
            "timestamp_type": self.timestamp_type, "size": self.size,
            "key": self.key.as_json(), "value": self.value.as_json(),
            "headers": [{"name": k, **v.as_json()} for k, v in self.headers],
        }


@dataclass
class MessagePage:
    query: MessageQuery
    messages: list[BrowsedMessage]
    scanned: int
    # partition -> (log start offset, high watermark) when read: where a live tail resumes
    watermarks: dict[int, tuple[int, int]] = field(default_factory=dict)

    @property
    def positions(self) -> str:
        """"partition:offset,..." of every high watermark, for the live tail."""
        return ",".join(f"{p}:{high}" for p, (_, high) in sorted(self.watermarks.items()))


def browse(reader: RecordReader, query: MessageQuery) -> MessagePage:
    """Read, decode and filter one page of messages; ClusterRequestError/Unavailable pass."""
    partitions = reader.partitions(query.topic)
    if query.partition is not None:
        if query.partition not in partitions:
            raise ValueError(f"partition {query.partition} does not exist "
                             f"(the topic has {len(partitions)})")
        partitions = [query.partition]
    watermarks = {p: reader.watermarks(query.topic, p) for p in partitions}
    per_partition = _per_partition(query, len(partitions))
    starts = _starts(reader, query, watermarks)
    ranges = {
        p: ((max(low, high - per_partition), high) if query.start == NEWEST
            else (starts[p], min(high, starts[p] + per_partition)))
        for p, (low, high) in watermarks.items()
    }
    budget = per_partition * len(partitions)
    records = reader.read(query.topic, ranges, max_records=budget, max_bytes=MAX_BYTES)
    messages = decode(records)
    shown = sorted((m for m in messages if query.matches(m)), key=order_key,
                   reverse=query.start == NEWEST)
    return MessagePage(query, shown[: query.limit], len(records), watermarks)


def _per_partition(query: MessageQuery, partitions: int) -> int:
    if not query.filtered:
        return query.limit
    return max(query.limit, SCAN_LIMIT // max(partitions, 1))


def _starts(reader: RecordReader, query: MessageQuery,
            watermarks: dict[int, tuple[int, int]]) -> dict[int, int]:
    if query.start == TIMESTAMP and query.timestamp is not None:
        millis = int(query.timestamp.timestamp() * 1000)
        return reader.offsets_for_time(query.topic, millis, list(watermarks))
    if query.start == OFFSET and query.offset is not None:
        return {p: min(max(query.offset, low), high) for p, (low, high) in watermarks.items()}
    return {p: low for p, (low, _) in watermarks.items()}


def order_key(message: BrowsedMessage) -> tuple[float, int, int]:
    """The pages' order of messages: by timestamp, then partition and offset."""
    stamp = message.timestamp.timestamp() if message.timestamp else 0.0
    return (stamp, message.partition, message.offset)


def decode(records: Iterable[ConsumedRecord]) -> list[BrowsedMessage]:
    decoder = Decoder()
    return [
        BrowsedMessage(
            partition=r.partition, offset=r.offset,
            timestamp=(None if r.timestamp_ms is None
                       else dt.datetime.fromtimestamp(r.timestamp_ms / 1000, dt.UTC)),
            timestamp_type=r.timestamp_type, key=decoder.render(r.key),
            value=decoder.render(r.value),
            headers=tuple((k, decoder.render(v)) for k, v in r.headers), size=r.size,
        )
        for r in records
    ]


def as_json(messages: list[BrowsedMessage]) -> str:
    return json.dumps([m.as_json() for m in messages], indent=2, ensure_ascii=False)


CSV_COLUMNS = ("partition", "offset", "timestamp", "key_format", "key", "value_format",
               "value", "headers")


def as_csv(messages: list[BrowsedMessage]) -> str:
    """One row per message; binary keys and values as base64, headers as a JSON object."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for m in messages:
        writer.writerow([
            m.partition, m.offset, m.timestamp.isoformat() if m.timestamp else "",
            m.key.kind, _cell(m.key), m.value.kind, _cell(m.value),
            json.dumps({k: _cell(v) for k, v in m.headers}, ensure_ascii=False),
        ])
    return out.getvalue()


def _cell(rendered: Rendered) -> str:
    return rendered.base64 if rendered.kind == "binary" else rendered.text
