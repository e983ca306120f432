"""v3 produce: one record, a stream of records in one request, and records:batch.

A request body holding several concatenated JSON records, or sent with chunked transfer
encoding, is a stream: every record gets its own delivery report, in request order, as
newline-delimited JSON under one HTTP 200, and failures live in each report's error_code.
Through the fast lane a stream's records are parsed and produced as the body arrives, and
their reports sent while the client is still sending (`ProduceStream`).
"""

from __future__ import annotations

import asyncio
import codecs
import json
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from django.conf import settings
from django.http import HttpResponseBase, StreamingHttpResponse
from rest_framework.request import Request
from rest_framework.response import Response

from restproxy import actions, client, errors, records
from restproxy.api import Later, _on_loop, read_body
from restproxy.client import PendingBatch, gateway

from .views import ClusterView

T = TypeVar("T")

REPORT_TIMEOUT = 60.0
NUMBER_GOES_ON = frozenset(["", *"0123456789.eE+-"])  # what may follow a cut-short number


def split_json_values(raw: bytes) -> list[Any | errors.RestProxyError]:
    """Concatenated JSON values; a malformed tail becomes one error and ends the list."""
    return JsonValues(len(raw)).feed(raw, final=True)


class JsonValues:
    """Concatenated JSON values parsed as the bytes arrive.

    `feed` returns the values completed so far. A value that fails to parse may only be cut
    short, so it waits for more bytes; once the body has ended it is malformed, becomes one
    error and ends the values. So does an unfinished value longer than `limit` bytes. A
    number at the end of what has arrived (or before a `.`, `e`, ...) may go on, so it
    waits too: every other JSON value ends with a character of its own.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.text = ""
        self.ended = False  # a malformed or oversized value ended the values
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        self._decoder = json.JSONDecoder()

    def feed(self, data: bytes, final: bool) -> list[Any | errors.RestProxyError]:
        if self.ended:
            return []
        text = self.text + self._utf8.decode(data, final)
        values: list[Any] = []
        position, end = 0, len(text)
        while True:
            while position < end and text[position] in " \t\r\n":
                position += 1
            if position >= end:
                break
            try:
                value, after = self._decoder.raw_decode(text, position)
            except ValueError as exc:
                if final:
                    values.append(errors.bad_request(f"Malformed JSON record: {exc}"))
                    self.ended = True
                break
            if not final and _open_ended(value) and text[after:after + 1] in NUMBER_GOES_ON:
                break
            values.append(value)
            position = after
        self.text = text[position:]
        if len(self.text) > self.limit and not self.ended:
            values.append(errors.body_too_large(self.limit))
            self.ended = True
        return values


def _open_ended(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


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


class ProduceStream:
    """A v3 stream: each record produced as its bytes arrive, and its report sent as soon
    as it and every record before it have theirs (Confluent's streaming mode).

    `take` parses and produces what a part of the body completes; `reports` yields the
    report lines in request order, reading the rest of the body meanwhile (a task of its
    own), so a slow client sees reports long before its body ends.
    """

    def __init__(self, cluster_id: str, topic: str, values: JsonValues) -> None:
        self.cluster_id, self.topic, self.values = cluster_id, topic, values
        self.entries: list[records.V3Entry | errors.RestProxyError] = []
        self.batch = PendingBatch(0, gateway())
        self._grown = asyncio.Event()  # entries were added, or the body ended

    async def started(self, first: list[Any | errors.RestProxyError],
                      rest: AsyncIterator[bytes]) -> StreamingHttpResponse:
        """The response, its first records produced, the rest to come from `rest`."""
        await self.add(first)
        return StreamingHttpResponse(self.reports(rest), content_type="application/json")

    async def take(self, data: bytes, final: bool) -> None:
        await self.add(self.values.feed(data, final))

    async def add(self, values: list[Any | errors.RestProxyError]) -> None:
        if not values:
            return
        entries = [await _on_loop_else_thread(parse_entry, self.topic, value)
                   for value in values]
        try:
            await _on_loop_else_thread(actions.produce_v3, self.topic, entries, self.batch)
        except errors.RestProxyError as exc:  # the topic is gone: each record says so
            entries = [exc] * len(entries)
            for index in range(self.batch.extend(len(entries)), len(self.batch.done)):
                self.batch.complete(index)
        self.entries += entries
        self._grown.set()

    async def reports(self, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        head = json.dumps({"error_code": 200, "cluster_id": self.cluster_id,
                           "topic_name": self.topic})[:-1]
        reading = asyncio.ensure_future(self._read(rest))
        start = 0
        try:
            while start < len(self.entries) or not reading.done():
                if start == len(self.entries):
                    self._grown.clear()
                    await self._grown.wait()
                    continue
                # The batch may hold reports of records being added (on a thread).
                end = min(await self._ready_after(start), len(self.entries))
                yield "".join(report_line(head, self.cluster_id, self.topic,
                                          self.entries[i], self.batch, i)
                              for i in range(start, end)).encode()
                start = end
            await reading  # its error, if any
        finally:
            reading.cancel()

    async def _read(self, rest: AsyncIterator[bytes]) -> None:
        try:
            async for data in rest:
                await self.take(data, final=False)
                if self.values.ended:
                    break  # the rest of the body is not read (as before: not parsed)
            await self.take(b"", final=True)
        finally:
            self._grown.set()

    async def _ready_after(self, start: int) -> int:
        try:
            async with asyncio.timeout(REPORT_TIMEOUT):
                return await self.batch.ready_after(start)
        except TimeoutError:
            self.batch.expire()
            return len(self.entries)


async def _on_loop_else_thread(function: Callable[..., T], *args: Any) -> T:
    """`function` run on the loop, or on a thread if it needs one (a registry call, a
    metadata refresh: api.need_thread)."""
    token = _on_loop.set(True)
    try:
        return function(*args)
    except errors.NeedsThread:
        return await asyncio.to_thread(_off_loop, function, *args)
    finally:
        _on_loop.reset(token)


def _off_loop(function: Callable[..., T], *args: Any) -> T:
    _on_loop.set(False)  # a thread's own copy of the context
    return function(*args)


async def _nothing() -> AsyncIterator[bytes]:
    return
    yield


class RecordsView(ClusterView):
    """One record answers with its report; several, or a chunked body, are a stream.

    Through the fast lane the body arrives in parts (`LaneRequest.body_parts`) and a
    stream is parsed and produced as they come; through Django's handler it is read whole
    first.
    """

    loop_methods = frozenset({"POST"})

    def post(self, request: Request, cluster_id: str, topic: str) -> Any:
        self.links  # noqa: B018  (the cluster was checked in initial)
        cid = self.links.cluster_id
        chunked = "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower()
        parts: AsyncIterator[bytes] | None = getattr(request, "body_parts", None)
        if parts is None:  # the whole body is here
            values = split_json_values(read_body(request))
            if not values:
                raise errors.bad_request("Request body is empty")
            if len(values) == 1 and not chunked:
                return self.produce_one(cid, topic, values[0])
            stream = _stream(cid, topic)
            return Later(lambda: stream.started(values, _nothing()))
        body = parts
        client.topic(topic)  # an unknown topic fails before the body is read

        async def answer() -> HttpResponseBase:
            # A chunked body is a stream from its first record; otherwise one record alone
            # is answered by itself.
            stream = _stream(cid, topic)
            first, ended = await _first_values(stream.values, body, 1 if chunked else 2)
            if not first:
                raise errors.bad_request("Request body is empty")
            if len(first) == 1 and ended and not chunked:
                one = await _on_loop_else_thread(self.produce_one, cid, topic, first[0])
                return await one.finish()
            return await stream.started(first, body)

        return Later(answer)

    def produce_one(self, cluster_id: str, topic: str, value: Any) -> Later:
        if isinstance(value, errors.RestProxyError):
            raise value
        entry = records.v3_entry(topic, value)
        batch = actions.produce_v3(topic, [entry])

        async def answer() -> Response:
            await batch.all_done_within(REPORT_TIMEOUT)
            body = actions.v3_report(cluster_id, topic, entry, batch.reports[0])
            return Response(body, status=http_status(int(body["error_code"])))

        return Later(answer)


def http_status(error_code: int) -> int:
    """The HTTP status of a record's report: its error_code, or the status a Confluent
    code names (40301: 403)."""
    return error_code // 100 if error_code >= 1000 else error_code


def _stream(cluster_id: str, topic: str) -> ProduceStream:
    return ProduceStream(cluster_id, topic, JsonValues(settings.RESTPROXY_MAX_REQUEST_BYTES))


async def _first_values(values: JsonValues, parts: AsyncIterator[bytes], wanted: int
                        ) -> tuple[list[Any | errors.RestProxyError], bool]:
    """At least `wanted` values, or all there are; and whether the body has ended."""
    found: list[Any | errors.RestProxyError] = []
    while len(found) < wanted and not values.ended:
        try:
            data = await anext(parts)
        except StopAsyncIteration:
            return found + values.feed(b"", final=True), True
        found += values.feed(data, final=False)
    return found, values.ended


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
