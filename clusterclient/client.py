"""ClusterClient: one cluster, one AdminClient, a short-lived metadata cache, typed answers.

Every call is bounded by `timeout` seconds (librdkafka's request timeout and our wait on its
future), so a dead cluster raises ClusterUnavailable instead of hanging. Batched calls fire
every request first and then wait, so N groups cost about one round trip, not N.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    KafkaError,
    KafkaException,
)
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigResource,
    NewPartitions,
    NewTopic,
)
from confluent_kafka.admin import ConfigEntry as KafkaConfigEntry
from confluent_kafka.cimpl import _AdminClientImpl

from .configs import (
    AcksAllShortfall,
    ConfigChange,
    ConfigEntry,
    ResourceKind,
    entry_from_confluent,
)
from .errors import ClusterRequestError, ClusterUnavailable, error_value, result, translate
from .group_reads import GroupReader, Unbatched
from .groups import (
    ConsumerGroup,
    GroupListing,
    GroupOffsets,
    GroupType,
    group_from_confluent,
    listing_from_confluent,
)
from .lag import GroupLag, group_lag
from .metadata import ClusterMetadata, TopicMetadata, TopicPartition, from_confluent
from .offset_reads import BY_TIME, OffsetReader, by_leader, no_answer, settle, timestamp_of
from .offsets import LATEST, ListedOffset, ListOffsetsResult, OffsetKind, OffsetQuery
from .wire import unsupported

UNKNOWN_TOPIC = 3  # Kafka's UNKNOWN_TOPIC_OR_PART
LEADERS_TTL_S = 60.0  # how old a metadata snapshot may be to route ListOffsets by
_RESOURCE = {ResourceKind.TOPIC: ConfigResource.Type.TOPIC,
             ResourceKind.BROKER: ConfigResource.Type.BROKER}


class ClusterClient:
    """The platform's connection to one Kafka cluster (thread-safe; share one per process).

        client = ClusterClient("127.0.0.1:9092", {"client.id": "millrace-collector"})
        snapshot = client.metadata()            # cached for `metadata_ttl` seconds
        lag = client.group_lag("orders-app")    # GroupLag with per-partition PartitionLag
    """

    def __init__(self, bootstrap_servers: str, config: Mapping[str, Any] | None = None, *,
                 timeout: float = 10.0, metadata_ttl: float = 5.0,
                 batched_groups: bool = True, batched_offsets: bool = True) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.timeout = timeout
        self.metadata_ttl = metadata_ttl
        ms = int(timeout * 1000)
        self.config: dict[str, Any] = {
            "bootstrap.servers": bootstrap_servers,
            "socket.timeout.ms": ms, "socket.connection.setup.timeout.ms": ms,
            **(config or {}),
        }
        self.admin = AdminClient(self.config)
        # Groups described and their offsets fetched in one request per coordinator
        # (group_reads.py), unless the config asks for security our own connection does
        # not speak (then, and with batched_groups=False, librdkafka's request per group).
        self.groups_reader: GroupReader | None = None
        if batched_groups and unsupported(self.config) is None:
            self.groups_reader = GroupReader(bootstrap_servers, self.config, timeout)
        # ListOffsets to each leader over our own connections (offset_reads.py), on the same
        # terms; batched_offsets=False: librdkafka's admin ListOffsets.
        self.offsets_reader: OffsetReader | None = None
        if batched_offsets and unsupported(self.config) is None:
            self.offsets_reader = OffsetReader(bootstrap_servers, self.config, timeout)
        self._metadata: ClusterMetadata | None = None
        self._metadata_at = 0.0
        self._lock = threading.Lock()

    def close(self) -> None:
        """Closes the batched group reads' sockets (the AdminClient goes with the object)."""
        for reader in (self.groups_reader, self.offsets_reader):
            if reader is not None:
                reader.close()

    def poll(self) -> None:
        """Hands librdkafka's queued log lines to the `logger` of the config, if it has one
        (confluent-kafka forwards them only on poll); without one they go to stderr."""
        self.admin.poll(0)

    def _wait(self, future: Future[Any], topic: str | None = None,
              partition: int | None = None) -> Any:
        # A little longer than librdkafka's own timeout, so that its answer wins the race.
        return result(future, self.timeout + 3.0, topic, partition)

    def _kw(self) -> dict[str, Any]:
        # An admin operation outlives its requests (socket.timeout.ms is `timeout`): a
        # request to a dead broker then fails inside the operation. When both timed out
        # together, librdkafka could meet the request's late "timed out" answer after the
        # operation had gone and abort the process (confluentinc/librdkafka#4605,
        # `rd_kafka_enq_once_del_source_return: eonce->refcnt > 0`), which a collector
        # watching a broker being killed hit.
        return {"request_timeout": self.timeout + 1.0}

    # --- metadata ---------------------------------------------------------------------
    def metadata(self, refresh: bool = False, timeout: float | None = None) -> ClusterMetadata:
        """All brokers and topics; the cached snapshot when younger than `metadata_ttl`.

        `timeout` (default: the client's) bounds this one request: a short one makes it a
        cheap probe of whether the cluster answers at all."""
        with self._lock:
            fresh = time.monotonic() - self._metadata_at < self.metadata_ttl
            if self._metadata is not None and fresh and not refresh:
                return self._metadata
        try:
            raw = self.admin.list_topics(timeout=self.timeout if timeout is None else timeout)
        except KafkaException as exc:
            raise translate(exc) from exc
        snapshot = from_confluent(raw)
        with self._lock:
            self._metadata, self._metadata_at = snapshot, time.monotonic()
        return snapshot

    def cached_metadata(self) -> ClusterMetadata | None:
        """The cached snapshot while younger than `metadata_ttl`, else None; never blocks."""
        with self._lock:
            fresh = time.monotonic() - self._metadata_at < self.metadata_ttl
            return self._metadata if fresh else None

    def invalidate_metadata(self) -> None:
        with self._lock:
            self._metadata_at = 0.0

    def topic(self, name: str) -> TopicMetadata:
        """One topic (refreshed once on a miss); ClusterRequestError UNKNOWN_TOPIC_OR_PART."""
        found = self.metadata().topics.get(name)
        if found is None or found.error is not None:
            found = self.metadata(refresh=True).topics.get(name)
        if found is None or (found.error is not None and not found.partitions):
            raise ClusterRequestError(UNKNOWN_TOPIC, "UNKNOWN_TOPIC_OR_PART",
                                      f"Topic {name} not found.", name)
        return found

    # --- topics -----------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = -1, replication_factor: int = -1,
                     configs: Mapping[str, str] | None = None,
                     validate_only: bool = False) -> None:
        """-1 takes the broker's num.partitions / default.replication.factor."""
        new = NewTopic(name, partitions, replication_factor, config=dict(configs or {}))
        futures = self.admin.create_topics([new], validate_only=validate_only,
                                           operation_timeout=self.timeout, **self._kw())
        self._wait(futures[name], name)
        self.invalidate_metadata()

    def acks_all_shortfall(self, topic: str) -> AcksAllShortfall | None:
        """When `topic` has fewer replicas than its effective min.insync.replicas, which no
        broker can ever make good: every acks=all write to it fails NOT_ENOUGH_REPLICAS
        (Kafka accepts such a topic; tools warn). None when writes can succeed."""
        replicas = min((len(p.replicas) for p in self.topic(topic).partitions), default=0)
        entry = next((e for e in self.topic_configs(topic) if e.name == "min.insync.replicas"),
                     None)
        if entry is None or entry.value is None or not entry.value.isdigit():
            return None
        min_isr = int(entry.value)
        return AcksAllShortfall(topic, replicas, min_isr) if 0 < replicas < min_isr else None

    def delete_topic(self, name: str) -> None:
        futures = self.admin.delete_topics([name], operation_timeout=self.timeout,
                                           **self._kw())
        self._wait(futures[name], name)
        self.invalidate_metadata()

    def create_partitions(self, topic: str, total_count: int,
                          validate_only: bool = False) -> None:
        """Grow `topic` to `total_count` partitions."""
        futures = self.admin.create_partitions([NewPartitions(topic, total_count)],
                                               validate_only=validate_only, **self._kw())
        self._wait(futures[topic], topic)
        self.invalidate_metadata()

    def delete_records(self, before: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Move each partition's log start up to the given offset (-1: the end); the new
        low watermarks."""
        if not before:
            return {}
        futures = self.admin.delete_records(
            [KafkaTopicPartition(tp.topic, tp.partition, o) for tp, o in before.items()],
            operation_timeout=self.timeout, **self._kw())
        return {TopicPartition(k.topic, k.partition):
                int(self._wait(f, k.topic, k.partition).low_watermark)
                for k, f in futures.items()}

    # --- configs ----------------------------------------------------------------------
    def describe_configs(self, kind: ResourceKind, name: str) -> list[ConfigEntry]:
        """Every config of a topic or broker (name = broker id), sorted by name."""
        resource = ConfigResource(_RESOURCE[kind], name)
        futures = self.admin.describe_configs([resource], **self._kw())
        entries = self._wait(futures[resource], name if kind is ResourceKind.TOPIC else None)
        return sorted((entry_from_confluent(e) for e in entries.values()), key=lambda e: e.name)

    def topic_configs(self, topic: str) -> list[ConfigEntry]:
        return self.describe_configs(ResourceKind.TOPIC, topic)

    def broker_configs(self, broker_id: int) -> list[ConfigEntry]:
        return self.describe_configs(ResourceKind.BROKER, str(broker_id))

    def incremental_alter_configs(self, kind: ResourceKind, name: str,
                                  changes: Sequence[ConfigChange],
                                  validate_only: bool = False) -> None:
        """SET, DELETE (back to the default), APPEND or SUBTRACT configs in one request."""
        entries = [KafkaConfigEntry(c.name, c.value,
                                    incremental_operation=AlterConfigOpType[c.operation.value])
                   for c in changes]
        resource = ConfigResource(_RESOURCE[kind], name, incremental_configs=entries)
        futures = self.admin.incremental_alter_configs([resource], validate_only=validate_only,
                                                       **self._kw())
        self._wait(futures[resource], name if kind is ResourceKind.TOPIC else None)

    def alter_configs(self, kind: ResourceKind, name: str, configs: Mapping[str, str],
                      validate_only: bool = False) -> None:
        """The legacy AlterConfigs: `configs` replaces every dynamic config of the resource."""
        resource = ConfigResource(_RESOURCE[kind], name, set_config=dict(configs))
        futures = self.admin.alter_configs([resource], validate_only=validate_only,
                                           **self._kw())
        self._wait(futures[resource], name if kind is ResourceKind.TOPIC else None)

    # --- offsets ----------------------------------------------------------------------
    def list_offsets(self, queries: Mapping[TopicPartition, OffsetQuery]) -> ListOffsetsResult:
        """One batched ListOffsets for many partitions (one request per leader); a
        partition's own error is a value in the result, not an exception.

        Sent over our own connections (offset_reads.py) unless the config asks for security
        they do not speak or the cluster serves no ListOffsets v1 to v7; then, and for
        max-timestamp queries (ListOffsets v7, Kafka 3.0), through librdkafka's admin API."""
        if not queries:
            return ListOffsetsResult()
        reader = self.offsets_reader
        if reader is not None and all(q.kind is not OffsetKind.MAX_TIMESTAMP
                                      for q in queries.values()):
            try:
                return self._list_offsets_batched(reader, queries)
            except Unbatched:
                self.offsets_reader = None
                reader.close()
        return self._list_offsets_librdkafka(queries)

    def _list_offsets_batched(self, reader: OffsetReader,
                              queries: Mapping[TopicPartition, OffsetQuery]) -> ListOffsetsResult:
        """Each leader asked for its partitions, from the last metadata. The partitions it
        gives no leader, whose leader says it is not theirs (any more) or does not answer
        are asked once more after the metadata is read afresh, as librdkafka looks the
        leaders up for every call; what is still missing then is an error value. Raises
        ClusterUnavailable when no leader answered at all."""
        timestamps = {q: timestamp_of(q) for q in set(queries.values())}
        found = ListOffsetsResult()
        pending: Mapping[TopicPartition, OffsetQuery] = queries
        for fresh in (False, True):
            led, again = by_leader(self._leaders_metadata(fresh), pending)
            answers, failed = reader.list_offsets(
                {b: {tp: timestamps[pending[tp]] for tp in tps} for b, tps in led.items()})
            asked = {tp: pending[tp] for tps in led.values() for tp in tps}
            again.update(settle(found, asked, answers))
            for broker, problem in failed.items():
                again.update((tp, no_answer(tp, problem.message)) for tp in led[broker])
            if fresh and failed and not found.offsets:
                raise next(iter(failed.values()))
            pending = {tp: pending[tp] for tp in again}
            if not pending:
                break
            if fresh:
                found.errors.update(again)
        return found

    def _leaders_metadata(self, fresh: bool) -> ClusterMetadata:
        """Where to send ListOffsets: the last snapshot while younger than LEADERS_TTL_S,
        whatever `metadata_ttl` says (the collector's is 0: it reads Metadata itself right
        before), for a wrong leader only costs asking again with a fresh one."""
        if not fresh:
            with self._lock:
                if (self._metadata is not None
                        and time.monotonic() - self._metadata_at < LEADERS_TTL_S):
                    return self._metadata
        return self.metadata(refresh=True)

    def _list_offsets_librdkafka(self, queries: Mapping[TopicPartition, OffsetQuery]
                                 ) -> ListOffsetsResult:
        """The same request through librdkafka with ONE future for the whole answer, not
        through AdminClient.list_offsets, which makes and settles a future per partition: at
        10,000 partitions those futures were a third of the collector's read (bench/README.md,
        collector_db_bench.py). The answer is the same dict that method spreads over them."""
        specs = {q: q.spec()._value for q in set(queries.values())}  # one each: 10,000 cost 1 s
        whole: Future[Any] = Future()
        whole.set_running_or_notify_cancel()
        _AdminClientImpl.list_offsets(
            self.admin,
            [KafkaTopicPartition(tp.topic, tp.partition, specs[q]) for tp, q in queries.items()],
            whole, **self._kw())
        found = ListOffsetsResult()
        try:
            answers = self._wait(whole)
        except ClusterRequestError as exc:  # the request's own error: every partition's
            found.errors.update(dict.fromkeys(queries, exc))
            return found
        for k, info in answers.items():
            tp = TopicPartition(k.topic, k.partition)
            if isinstance(info, KafkaError):
                problem = translate(info, k.topic, k.partition)
                if isinstance(problem, ClusterUnavailable):
                    raise problem
                found.errors[tp] = problem
                continue
            offset = int(info.offset)
            if offset < 0 and not (offset == -1 and queries[tp].kind in BY_TIME):
                # librdkafka answers a partition whose leader it could not reach with
                # OFFSET_INVALID (-1001) and no error: no offset was read, so say so.
                found.errors[tp] = no_answer(tp, f"its leader gave no {queries[tp].kind} "
                                                 f"offset (got {offset})")
                continue
            found.offsets[tp] = ListedOffset(offset, int(info.timestamp), info.leader_epoch)
        return found

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> ListOffsetsResult:
        return self.list_offsets(dict.fromkeys(partitions, LATEST))

    # --- consumer groups --------------------------------------------------------------
    def list_groups(self, types: Iterable[GroupType] = ()) -> list[GroupListing]:
        """Every group of every broker, or of the given protocols only (ListGroups v5's
        types filter), the brokers being those of the metadata now (group_reads.py; with
        librdkafka, every broker it has known). If some broker did not answer, the groups
        of the others are returned; if none answered, its error is raised."""
        reader = self.groups_reader
        if reader is not None:
            try:
                return reader.list_groups([t.value for t in types])
            except Unbatched:
                self.groups_reader = None
                reader.close()
        kinds = {ConsumerGroupType[t.name] for t in types}
        listing = self._wait(self.admin.list_consumer_groups(
            **self._kw(), **({"types": kinds} if kinds else {})))
        if listing.errors and not listing.valid:
            raise translate(listing.errors[0])
        return sorted((listing_from_confluent(g) for g in listing.valid),
                      key=lambda g: g.group_id)

    def describe_groups(self, group_ids: Sequence[str]) -> dict[str, ConsumerGroup]:
        """Every group described in one batch (a group unknown to Kafka comes back DEAD):
        one ConsumerGroupDescribe and one DescribeGroups per coordinator, or with librdkafka
        (a secured config it alone speaks) one request per group, all in flight at once."""
        if not group_ids:
            return {}
        reader = self.groups_reader
        if reader is not None:
            try:
                return reader.describe(group_ids)
            except Unbatched:  # a broker before Kafka 3.0: librdkafka's way from now on
                self.groups_reader = None
                reader.close()
        futures = self.admin.describe_consumer_groups(list(group_ids), **self._kw())
        return {g: group_from_confluent(self._wait(f)) for g, f in futures.items()}

    def describe_group(self, group_id: str) -> ConsumerGroup:
        return self.describe_groups([group_id])[group_id]

    def committed_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        """The group's committed offsets; partitions without a commit are left out."""
        offsets = self.committed_offsets_many([group_id])[group_id]
        if offsets.error is not None:
            raise offsets.error
        return offsets.offsets

    def committed_offsets_many(self, group_ids: Sequence[str]) -> dict[str, GroupOffsets]:
        """Committed offsets of many groups: one OffsetFetch v8 per coordinator (or with
        librdkafka one per group, every one sent before any answer is awaited). A group's
        own error is a value; an unreachable cluster raises."""
        reader = self.groups_reader
        if reader is not None and group_ids:
            try:
                return reader.committed(group_ids)
            except Unbatched:
                self.groups_reader = None
                reader.close()
        futures = {
            g: self.admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(g)],
                                                      **self._kw())[g]
            for g in dict.fromkeys(group_ids)
        }
        answers = {}
        for group_id, future in futures.items():
            try:
                found = self._wait(future)
            except ClusterRequestError as exc:
                answers[group_id] = GroupOffsets(group_id, {}, exc)
                continue
            answers[group_id] = GroupOffsets(group_id, {
                TopicPartition(tp.topic, tp.partition): int(tp.offset)
                for tp in found.topic_partitions or [] if tp.offset >= 0 and tp.error is None
            })
        return answers

    def alter_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit `offsets` for an inactive group (Kafka refuses while members are active)."""
        request = ConsumerGroupTopicPartitions(group_id, [
            KafkaTopicPartition(tp.topic, tp.partition, o) for tp, o in offsets.items()])
        future = self.admin.alter_consumer_group_offsets([request], **self._kw())[group_id]
        answer = self._wait(future)
        for tp in answer.topic_partitions or []:
            problem = error_value(tp.error, tp.topic, tp.partition)
            if problem is not None:
                raise problem

    def delete_groups(self, group_ids: Sequence[str]) -> None:
        """Delete empty groups and their offsets; the first refusal is raised."""
        if not group_ids:
            return
        futures = self.admin.delete_consumer_groups(list(group_ids), **self._kw())
        for future in futures.values():
            self._wait(future)

    # --- lag --------------------------------------------------------------------------
    def group_lag(self, group_id: str) -> GroupLag:
        return self.group_lags([group_id])[group_id]

    def group_lags(self, group_ids: Sequence[str]) -> dict[str, GroupLag]:
        """Lag of many groups from three batched round trips: DescribeGroups, OffsetFetch
        per group (all in flight at once) and one ListOffsets for every partition involved.
        A group whose OffsetFetch failed gets its error raised."""
        groups = self.describe_groups(group_ids)
        committed = self.committed_offsets_many(group_ids)
        partitions: set[TopicPartition] = set()
        for g in group_ids:
            problem = committed[g].error
            if problem is not None:
                raise problem
            partitions |= set(committed[g].offsets)
            partitions |= {tp for m in groups[g].members for tp in m.assignment}
        ends = self.end_offsets(sorted(partitions))
        return {g: group_lag(groups[g], committed[g].offsets, ends) for g in group_ids}

