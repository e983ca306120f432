"""The Messages page's live tail: new records pushed over the page's websocket.

One `Tail` per tailed topic in this web process: one `clusterclient.RecordFollower` (assign
only, no group, no commits) on a thread of its own, shared by every browser tailing the topic
here. The first browser starts it; it stops when the last one leaves. Browsers join and
leave through an inbox (the one thing shared, under the hub's lock); the tail's thread
alone owns its reader, its followers and their positions.

Each browser (`Follower`) has its filters (partition, key, value, header: the browse form's)
and, per partition, the first offset it has not seen. A browser that joins behind the tail
(records produced between its page's read and its tick of the box) makes the tail seek back
for it, at most `CATCH_UP` records; the others skip what they already had. Every `PERIOD`
the tail reads at most `BATCH` records; followers with the same filters and the same records
get ONE rendered fragment (newest first, at most `MAX_ROWS` rows and `MAX_BYTES` of records,
the rest counted as skipped). A topic faster than the tail reads is skipped ahead to its end
rather than followed ever further behind. A tail follows the partitions the topic had when
it started; partitions added later are followed by the next tail.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import close_old_connections, connections
from django.template.loader import render_to_string

from clusterclient import ClusterRequestError, ClusterUnavailable
from clusterclient.records import ConsumedRecord, RecordFollower
from controlcenter import clusters, connection, live, messagebrowser
from controlcenter.messagebrowser import MessageQuery

log = logging.getLogger(__name__)

PERIOD = 0.5  # seconds between two reads, so at most two pushes a second to a browser
BATCH = 500  # records read per period
CATCH_UP = 500  # records per partition a joining browser may be behind the tail
MAX_ROWS = 100  # rows in one push; older matching records are counted as skipped
MAX_BYTES = 1 << 20  # record bytes rendered in one push
SKIP_AHEAD = 5000  # records behind the log end at which the tail jumps to it
MAX_TAILS = 32  # tailed topics per process
ROWS_ID = "message-rows"

Send = Callable[[str], None]  # thread-safe: hands one JSON text to one browser


@dataclass(eq=False)
class Follower:
    """One browser tailing a topic: its filters and where it is."""

    send: Send
    query: MessageQuery
    positions: dict[int, int] = field(default_factory=dict)  # partition -> next offset

    def wants(self, record: ConsumedRecord) -> bool:
        if self.query.partition is not None and record.partition != self.query.partition:
            return False
        return record.offset >= self.positions.get(record.partition, record.offset)


class TailError(Exception):
    """This process tails as many topics as it may."""


class Tail:
    """One topic's reader and the browsers following it (module docstring)."""

    def __init__(self, hub: TailHub, topic: str, cluster: str = "") -> None:
        self.hub, self.topic, self.cluster = hub, topic, cluster  # cluster "": the default
        self.inbox: list[tuple[str, Follower]] = []  # ("join" | "leave", follower)
        self.followers: list[Follower] = []
        self.position: dict[int, int] = {}  # partition -> next offset the reader reads
        self.closing = False
        self.thread = threading.Thread(target=self._run, name=f"tail-{topic}", daemon=True)

    def _run(self) -> None:
        with clusters.using(self.cluster):  # a thread starts without the request's context
            self._tail()

    def _tail(self) -> None:
        try:
            with connection.record_follower() as reader:
                self.position = {p: reader.watermarks(self.topic, p)[1]
                                 for p in reader.partitions(self.topic)}
                reader.follow(self.topic, self.position)
                while self._take_inbox(reader):
                    started = time.monotonic()
                    records = self._read(reader)
                    if records:
                        self._deliver(records)
                    time.sleep(max(0.0, PERIOD - (time.monotonic() - started)))
        except ClusterRequestError as exc:
            self._fail(f"{exc.code_name}: {exc.message}")
        except ClusterUnavailable as exc:
            self._fail(f"The cluster did not answer: {exc.message}")
        except Exception:  # a bug: the browsers still hear that their tail stopped
            log.exception("tail of %s failed", self.topic)
            self._fail("The server could not go on; its log says why.")
        finally:
            connections.close_all()

    def _take_inbox(self, reader: RecordFollower) -> bool:
        """Apply joins and leaves; False (and the tail is gone) once nobody follows."""
        with self.hub.lock:
            inbox, self.inbox = self.inbox, []
            for verb, follower in inbox:
                if verb == "leave" and follower in self.followers:
                    self.followers.remove(follower)
            joined = [f for verb, f in inbox if verb == "join" and f not in self.followers]
            if not self.followers and not joined:
                self.closing = True
                self.hub.tails.pop((self.cluster, self.topic), None)
                return False
        if joined:
            self._join(reader, joined)
        return True

    def _join(self, reader: RecordFollower, joined: list[Follower]) -> None:
        """Each new follower starts where it says, at most CATCH_UP behind; the reader
        seeks back when one starts before it."""
        seek: dict[int, int] = {}
        for follower in joined:
            for partition, position in self.position.items():
                # Ahead of the reader (its page was read after the reader's last poll), it
                # skips what it has; behind, the reader goes back for it.
                wanted = follower.positions.get(partition, position)
                start = max(wanted, position - CATCH_UP)
                if start < position:
                    start = max(start, reader.watermarks(self.topic, partition)[0])
                follower.positions[partition] = start
                if start < seek.get(partition, position):
                    seek[partition] = start
            self.followers.append(follower)
        if seek:
            self.position.update(seek)
            reader.follow(self.topic, self.position)

    def _read(self, reader: RecordFollower) -> list[ConsumedRecord]:
        records = reader.poll(BATCH, timeout=PERIOD)
        for record in records:
            self.position[record.partition] = record.offset + 1
        if len(records) >= BATCH:
            self._skip_ahead(reader)
        return records

    def _skip_ahead(self, reader: RecordFollower) -> None:
        """A topic faster than the tail: jump to the end rather than fall further behind."""
        ends = {p: reader.watermarks(self.topic, p)[1] for p in self.position}
        behind = {p: end for p, end in ends.items() if end - self.position[p] > SKIP_AHEAD}
        if behind:
            self.position.update(behind)
            reader.follow(self.topic, self.position)

    def _deliver(self, records: list[ConsumedRecord]) -> None:
        """Render once per group of followers that get the same records, then send."""
        close_old_connections()
        decoded = {(m.partition, m.offset): m for m in messagebrowser.decode(records)}
        rendered: dict[tuple[object, ...], str | None] = {}
        for follower in self.followers:
            mine = [r for r in records if follower.wants(r)]
            for record in mine:
                follower.positions[record.partition] = record.offset + 1
            shown = tuple((r.partition, r.offset) for r in mine)
            cache_key = (follower.query, shown)
            if cache_key not in rendered:
                rendered[cache_key] = _fragment(follower.query, [decoded[k] for k in shown])
            text = rendered[cache_key]
            if text is not None:
                follower.send(text)

    def _fail(self, text: str) -> None:
        log.warning("tail of %s stopped: %s", self.topic, text)
        with self.hub.lock:
            self.closing = True
            self.hub.tails.pop((self.cluster, self.topic), None)
            followers = self.followers + [f for verb, f in self.inbox if verb == "join"]
        for follower in followers:
            follower.send(tail_banner(f"The live tail of {self.topic} stopped. {text}"))


def _fragment(query: MessageQuery, messages: list[messagebrowser.BrowsedMessage]) -> str | None:
    """The rows for one push, newest first, within MAX_ROWS and MAX_BYTES; None if empty."""
    matching = sorted((m for m in messages if query.matches(m)), key=messagebrowser.order_key,
                      reverse=True)
    if not matching:
        return None
    shown: list[messagebrowser.BrowsedMessage] = []
    budget = MAX_BYTES
    for message in matching:
        if len(shown) >= MAX_ROWS or (shown and message.size > budget):
            break
        shown.append(message)
        budget -= message.size
    html = render_to_string("controlcenter/fragments/message_rows.html",
                            {"messages": shown, "tailed": True,
                             "skipped": len(matching) - len(shown)})
    return json.dumps(live.fragment(ROWS_ID, html, "afterbegin"))


def tail_banner(text: str) -> str:
    return json.dumps(live.banner("tail", text, "error"))


class TailHub:
    """This process's tails, by cluster ("": the default) and topic."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tails: dict[tuple[str, str], Tail] = {}

    def join(self, topic: str, follower: Follower, cluster: str = "") -> None:
        """Follow `topic` of `cluster` from the follower's positions; TailError if this
        process already tails MAX_TAILS topics."""
        with self.lock:
            tail = self.tails.get((cluster, topic))
            if tail is None or tail.closing:
                if len(self.tails) >= MAX_TAILS:
                    raise TailError(f"this server already tails {MAX_TAILS} topics")
                tail = self.tails[(cluster, topic)] = Tail(self, topic, cluster)
                tail.thread.start()
            tail.inbox.append(("join", follower))

    def leave(self, topic: str, follower: Follower, cluster: str = "") -> None:
        with self.lock:
            tail = self.tails.get((cluster, topic))
            if tail is not None:
                tail.inbox.append(("leave", follower))


TAILS = TailHub()


TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


def parse_positions(text: str) -> dict[int, int]:
    """"partition:offset,..." (where the page's read ended) as {partition: offset}."""
    positions = {}
    for item in filter(None, text.split(",")):
        partition, sep, offset = item.partition(":")
        if not sep or not partition.isdigit() or not offset.isdigit():
            raise ValueError(f"positions are partition:offset pairs, not {item!r}")
        positions[int(partition)] = int(offset)
    return positions
