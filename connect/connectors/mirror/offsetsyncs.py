"""The checkpoint task's view of the offset syncs: what it has read of the offset-syncs
topic, per source partition, and the translation of a consumer group's offset through it.

A sync `(u, d)` says upstream record `u` is downstream record `d`. A group that committed
`U` has read every record before `U`. Through the newest sync with `u <= U`: if `u == U`
the group resumes at `d` exactly; otherwise it has read `u` and some records after it, whose
downstream places are only known to be after `d`, so it resumes at `d + 1`. That never
skips a record, and re-reads at most the records between `u` and `U` (fewer than
`offset.lag.max` when the source writes syncs as ours does). A group behind every sync
kept gets no translation.
"""

from __future__ import annotations

import bisect
import logging
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from connect.connectors.mirror.formats import FormatError, OffsetSync

log = logging.getLogger(__name__)
KEEP = 64  # syncs kept per partition: the newest, and older ones ever more thinly


class SyncTable:
    """Per source partition, the kept syncs sorted by upstream offset."""

    def __init__(self) -> None:
        self.syncs: dict[tuple[str, int], list[tuple[int, int]]] = {}

    def add(self, sync: OffsetSync) -> None:
        kept = self.syncs.setdefault((sync.topic, sync.partition), [])
        mapping = (sync.upstream_offset, sync.downstream_offset)
        # a sync at or before one kept supersedes the later ones (the source was rewound
        # or the remote topic recreated): what they said may no longer hold
        while kept and (kept[-1][0] >= mapping[0] or kept[-1][1] >= mapping[1]):
            kept.pop()
        kept.append(mapping)
        if len(kept) > KEEP:
            kept[:] = _thinned(kept)

    def translate(self, topic: str, partition: int, upstream: int) -> int | None:
        kept = self.syncs.get((topic, partition))
        if not kept:
            return None
        i = bisect.bisect_right(kept, (upstream, float("inf"))) - 1
        if i < 0:
            return None
        u, d = kept[i]
        return d if u == upstream else d + 1


def _thinned(kept: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The newest half as they are; before them, one sync per doubling of the distance
    from the newest, so old offsets still translate, less closely."""
    recent = kept[-KEEP // 2:]
    newest = kept[-1][0]
    older: list[tuple[int, int]] = []
    bound = newest - recent[0][0]
    for mapping in reversed(kept[:-KEEP // 2]):
        if newest - mapping[0] >= bound * 2 or not older:
            older.append(mapping)
            bound = newest - mapping[0]
    return list(reversed(older)) + recent


class SyncReader:
    """Follows the offset-syncs topic into a SyncTable, from its beginning; `ready` once it
    has read up to the end the topic had when it started."""

    def __init__(self, settings: dict[str, str], topic: str) -> None:
        self.topic = topic
        self.table = SyncTable()
        self.consumer = Consumer({
            **settings, "group.id": "mirrormaker-offset-syncs-reader",
            "enable.auto.commit": False, "client.id": "mirrormaker-offset-syncs-reader"})
        self.assigned = False
        self.ready_at: int | None = None
        self.position = 0

    def _assign(self) -> bool:
        """Assigns the topic once it exists: librdkafka would not look for a missing one
        again for minutes (the source task creates it)."""
        if not self.assigned:
            try:
                found = self.consumer.list_topics(self.topic, timeout=5).topics.get(self.topic)
            except KafkaException as exc:
                log.info("offset syncs %s: %s", self.topic, exc)
                return False
            if found is None or found.error is not None or not found.partitions:
                return False
            self.consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
            self.assigned = True
        return True

    @property
    def ready(self) -> bool:
        if self.ready_at is None:
            if not self._assign():
                return False
            try:
                _low, high = self.consumer.get_watermark_offsets(
                    TopicPartition(self.topic, 0), timeout=5)
            except KafkaException as exc:
                log.info("offset syncs %s: %s", self.topic, exc)
                return False
            self.ready_at = high
        return self.position >= self.ready_at

    def read(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        if not self._assign():
            time.sleep(timeout)
            return
        while True:
            batch = self.consumer.consume(1000, max(0.0, deadline - time.monotonic()))
            for msg in batch:
                error = msg.error()
                if error is not None:
                    if error.fatal():
                        raise KafkaException(error)
                    if error.code() != KafkaError._PARTITION_EOF:
                        log.info("offset syncs %s: %s", self.topic, error)
                    continue
                self.position = msg.offset() + 1
                try:
                    self.table.add(OffsetSync.decode(msg.key(), msg.value()))
                except FormatError as exc:
                    log.warning("offset syncs %s@%d: skipped: %s", self.topic, msg.offset(),
                                exc)
            if not batch or time.monotonic() >= deadline:
                return

    def close(self) -> None:
        self.consumer.close()
