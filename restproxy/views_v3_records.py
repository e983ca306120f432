"""v3 produce: one record, a stream of records in one request, and records:batch.

A request body holding several concatenated JSON records, or sent with chunked transfer
encoding, is a stream: every record gets its own delivery report, in request order, as
newline-delimited JSON under one HTTP 200, and failures live in each report's error_code.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from django.conf import settings
from django.http import StreamingHttpResponse
from rest_framework.request import Request
from rest_framework.response import Response

from . import actions, errors, records
from .api import Later, read_body
from .client import PendingBatch
from .views_v3 import ClusterView

REPORT_TIMEOUT = 60.0


def split_json_values(raw: bytes) -> list[Any | errors.RestProxyError]:
    """Concatenated JSON values; a malformed tail becomes one error and ends the list."""
    text = raw.decode("utf-8", errors="replace")
    decoder = json.JSONDecoder()
    values: list[Any] = []
    position, end = 0, len(text)
    while True:
        while position < end and text[position] in " \t\r\n":
            position += 1
        if position >= end:
            return values
        try:
            value, position = decoder.raw_decode(text, position)
        except ValueError as exc:
            values.append(errors.bad_request(f"Malformed JSON record: {exc}"))
            return values
        values.append(value)


def parse_entry(topic: str, value: Any) -> records.V3Entry | errors.RestProxyError:
    if isinstance(value, errors.RestProxyError):
        return value
    try:
        return records.v3_entry(topic, value)
    except errors.RestProxyError as exc:
        return exc


def report(cluster_id: str, topic: str, entry: records.V3Entry | errors.RestProxyError,
           batch: PendingBatch, index: int) -> dict[str, Any]:
    if isinstance(entry, errors.RestProxyError):
        return {"error_code": entry.status, "message": entry.message}
    return actions.v3_report(cluster_id, topic, entry, batch.reports[index])


def report_line(head: str, cluster_id: str, topic: str,
                entry: records.V3Entry | errors.RestProxyError, batch: PendingBatch,
                index: int) -> str:
    """One NDJSON report line: `json.dumps(report(...))`, a delivered record's written
    straight from `head` (its constant start), a stream's main cost after producing."""
    delivered = batch.reports[index]
    if (isinstance(entry, errors.RestProxyError) or delivered.error is not None
            or delivered.partition is None or delivered.offset is None):
        return json.dumps(report(cluster_id, topic, entry, batch, index)) + "\n"
    iso = records.iso_timestamp(delivered.timestamp)
    timestamp = "null" if iso is None else f'"{iso}"'
    record = entry.record
    return (f'{head}, "partition_id": {delivered.partition:d}, "offset": {delivered.offset:d}, '
            f'"timestamp": {timestamp}, '
            f'"key": {_size(entry.key_type, record.key)}, '
            f'"value": {_size(entry.value_type, record.value)}}}\n')


def _size(kind: str | None, data: bytes | None) -> str:
    if kind is None:
        return "null"
    return f'{{"type": "{kind}", "size": {0 if data is None else len(data)}}}'


async def stream_reports(cluster_id: str, topic: str,
                         entries: list[records.V3Entry | errors.RestProxyError],
                         batch: PendingBatch) -> AsyncIterator[bytes]:
    head = json.dumps({"error_code": 200, "cluster_id": cluster_id, "topic_name": topic})[:-1]
    start = 0
    while start < len(entries):
        try:
            async with asyncio.timeout(REPORT_TIMEOUT):
                end = await batch.ready_after(start)
        except TimeoutError:
            batch.expire()
            end = len(entries)
        lines = [report_line(head, cluster_id, topic, entries[i], batch, i)
                 for i in range(start, end)]
        yield "".join(lines).encode()
        start = end


class RecordsView(ClusterView):
    loop_methods = frozenset({"POST"})

    def post(self, request: Request, cluster_id: str, topic: str) -> Any:
        self.links  # noqa: B018  (the cluster was checked in initial)
        values = split_json_values(read_body(request))
        chunked = "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower()
        if not values:
            raise errors.bad_request("Request body is empty")
        cid = self.links.cluster_id
        if len(values) == 1 and not chunked:
            return self.produce_one(cid, topic, values[0])
        entries = [parse_entry(topic, v) for v in values]
        batch = actions.produce_v3(topic, entries)
        return StreamingHttpResponse(stream_reports(cid, topic, entries, batch),
                                     content_type="application/json")

    def produce_one(self, cluster_id: str, topic: str, value: Any) -> Response:
        if isinstance(value, errors.RestProxyError):
            raise value
        entry = records.v3_entry(topic, value)
        batch = actions.produce_v3(topic, [entry])

        async def answer() -> Response:
            await batch.all_done_within(REPORT_TIMEOUT)
            body = actions.v3_report(cluster_id, topic, entry, batch.reports[0])
            status = 200 if body["error_code"] == 200 else int(body["error_code"])
            return Response(body, status=status)

        return Later(answer)


class RecordsBatchView(ClusterView):
    loop_methods = frozenset({"POST"})

    def post(self, request: Request, cluster_id: str, topic: str) -> Response:
        values = split_json_values(read_body(request))
        body = values[0] if len(values) == 1 else None
        entries_in = body.get("entries") if isinstance(body, dict) else None
        if not isinstance(entries_in, list) or not entries_in:
            raise errors.batch_invalid("records:batch needs a non-empty list of entries")
        limit = settings.RESTPROXY_V3_BATCH_MAX_ENTRIES
        if len(entries_in) > limit:
            raise errors.batch_invalid(f"A batch holds at most {limit} entries")
        ids = [e.get("id") if isinstance(e, dict) else None for e in entries_in]
        if any(not isinstance(i, str) or not i for i in ids) or len(set(ids)) != len(ids):
            raise errors.batch_invalid("Every entry needs a unique string id")
        entries = [parse_entry(topic, e) for e in entries_in]
        batch = actions.produce_v3(topic, entries)
        cluster_id = self.links.cluster_id

        async def answer() -> Response:
            await batch.all_done_within(REPORT_TIMEOUT)
            successes: list[dict[str, Any]] = []
            failures: list[dict[str, Any]] = []
            for index, (entry_id, entry) in enumerate(zip(ids, entries, strict=True)):
                result = report(cluster_id, topic, entry, batch, index)
                (successes if result["error_code"] == 200 else failures).append(
                    {"id": entry_id, **result})
            return Response({"successes": successes, "failures": failures}, status=207)

        return Later(answer)
