"""Streaming consume: one long response carrying a consumer instance's records as they arrive.

`GET consumers/{group}/instances/{instance}/records/stream` (beyond Confluent) writes one
record per line as newline-delimited JSON, in the shape of a v2 fetch, or as server-sent
events when Accept asks for `text/event-stream`. The stream runs on the event loop: each
step queues a short take on the instance's owner thread and awaits it without holding a
worker thread, so a stream left open for hours costs no thread. Records count as consumed
(stored offsets, `returned` for commits) only after their chunk has been handed to the
server; records taken but not delivered when the client goes away are put back.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import Future
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import Message
from django.conf import settings
from django.http import HttpResponseBase, StreamingHttpResponse
from rest_framework.request import Request

from restproxy import content_types, errors

from . import fetched
from .forwarding import forward_stream
from .instance import ConsumerInstance, message_size
from .views import InstanceView

T = TypeVar("T")
# The longest one step keeps the owner thread waiting for records: other requests to the
# instance (commit, seek) queue behind it, and deletion is noticed within a step.
STEP_SECONDS = 0.25
KEEPALIVE_SECONDS = 15.0


@dataclass(frozen=True)
class StreamLimits:
    """When a stream ends by itself; None is no limit (the client ends it)."""

    max_records: int | None = None
    max_bytes: int | None = None
    timeout: float | None = None

    @classmethod
    def from_query(cls, params: Mapping[str, str]) -> StreamLimits:
        def optional(name: str) -> int | None:
            raw = params.get(name)
            if raw is None or raw == "":
                return None
            try:
                value = int(raw)
            except ValueError as exc:
                raise errors.invalid_payload(f"{name} must be an integer") from exc
            if value < 0:
                raise errors.invalid_payload(f"{name} must not be negative")
            return value

        timeout_ms = optional("timeout")
        return cls(optional("max_records"), optional("max_bytes"),
                   None if timeout_ms is None else timeout_ms / 1000)


class _Framing:
    def __init__(self, media_type: str) -> None:
        self.sse = media_type == content_types.EVENT_STREAM

    def record(self, body: dict[str, Any]) -> str:
        line = json.dumps(body, separators=(",", ":"))
        if self.sse:
            return f"id: {body['topic']}/{body['partition']}/{body['offset']}\ndata: {line}\n\n"
        return line + "\n"

    def error(self, exc: errors.RestProxyError) -> bytes:
        line = json.dumps(exc.body())
        return (f"event: error\ndata: {line}\n\n" if self.sse else line + "\n").encode()


Step = tuple[list[Message], int, bool]


def _step(wait: float, max_bytes: int, oversize: bool, count: int | None
          ) -> Callable[[ConsumerInstance], Step]:
    """Take up to `count` records within `max_bytes`: (records, generation, full), where
    full means the next record is ready but no longer fits the stream's byte budget."""
    def run(instance: ConsumerInstance) -> Step:
        generation = instance.generation
        taken = instance.take(wait, max_bytes, oversize)
        if count is not None and len(taken) > count:
            instance.unread(taken[count:], generation)
            taken = taken[:count]
        return taken, generation, not taken and bool(instance.pending)
    return run


def _consumed(taken: list[Message]) -> Callable[[ConsumerInstance], None]:
    def run(instance: ConsumerInstance) -> None:
        instance.consumed(taken)
    return run


def _unread(taken: list[Message], generation: int) -> Callable[[ConsumerInstance], None]:
    def run(instance: ConsumerInstance) -> None:
        instance.unread(taken, generation)
    return run


def _give_back(instance: ConsumerInstance, taken: list[Message], generation: int) -> None:
    # A deleted instance takes its undelivered records with it.
    if taken:
        with suppress(errors.RestProxyError):
            instance.submit(_unread(taken, generation))


def _give_back_when_done(instance: ConsumerInstance, future: Future[Step]) -> None:
    if not future.cancelled() and future.exception() is None:
        taken, generation, _full = future.result()
        _give_back(instance, taken, generation)


async def _on_owner(instance: ConsumerInstance, function: Callable[[ConsumerInstance], Step]
                    ) -> Step:
    future = instance.submit(function)
    try:
        return await asyncio.wrap_future(future)
    except asyncio.CancelledError:
        # The client left while the owner thread was taking records for it.
        future.add_done_callback(lambda done: _give_back_when_done(instance, done))
        raise


async def stream_records(instance: ConsumerInstance, media_type: str, limits: StreamLimits
                         ) -> AsyncIterator[bytes]:
    framing = _Framing(media_type)
    fmt = instance.config.format
    deadline = None if limits.timeout is None else time.monotonic() + limits.timeout
    records = size = 0
    quiet_since = time.monotonic()
    with instance.in_use():
        # An empty chunk makes the server send the status and headers now, not with the
        # first record: a client waits for them before it starts reading.
        yield b""
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            count = None if limits.max_records is None else limits.max_records - records
            budget = settings.RESTPROXY_CONSUMER_MAX_BYTES
            if limits.max_bytes is not None:
                budget = min(budget, limits.max_bytes - size)
            if (left is not None and left <= 0) or count == 0 or budget <= 0:
                return
            wait = STEP_SECONDS if left is None else min(STEP_SECONDS, left)
            try:
                taken, generation, full = await _on_owner(
                    instance, _step(wait, budget, records == 0, count))
            except errors.RestProxyError as exc:
                yield framing.error(exc)
                return
            if full:
                return
            if not taken:
                if framing.sse and time.monotonic() - quiet_since > KEEPALIVE_SECONDS:
                    quiet_since = time.monotonic()
                    yield b": keep-alive\n\n"
                continue
            shown = fetched.present(taken, fmt)
            if shown.error is not None:  # a record the format cannot present stays next
                _give_back(instance, taken[len(shown.bodies):], generation)
                taken = taken[:len(shown.bodies)]
            delivered = False
            try:
                yield "".join(framing.record(body) for body in shown.bodies).encode()
                delivered = True
            finally:
                if not delivered:
                    _give_back(instance, taken, generation)
            try:
                instance.submit(_consumed(taken))
            except errors.RestProxyError as exc:
                yield framing.error(exc)
                return
            if shown.error is not None:
                yield framing.error(shown.error)
                return
            records += len(taken)
            size += sum(message_size(m) for m in taken)
            quiet_since = time.monotonic()


class RecordStreamView(InstanceView):
    """Records of a consumer instance as they arrive, over one long response (Millrace)."""

    check_accept = False

    def forward(self, request: Request, owner_url: str) -> HttpResponseBase:
        return forward_stream(request, owner_url)

    def get(self, request: Request, group: str, instance: str) -> HttpResponseBase:
        media_type = content_types.stream_media_type(request.META.get("HTTP_ACCEPT"),
                                                     self.instance.config.format)
        limits = StreamLimits.from_query(request.query_params)
        response = StreamingHttpResponse(stream_records(self.instance, media_type, limits),
                                         content_type=media_type)
        response["Cache-Control"] = "no-cache"
        # Tell buffering reverse proxies (nginx) to pass records on as they come.
        response["X-Accel-Buffering"] = "no"
        return response
