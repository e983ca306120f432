"""One cycle's reading of the cluster: every call the collector makes, batched.

Through clusterclient only (so an external Kafka works unchanged): Metadata (the probe:
answered within half an interval or the cluster is unreachable), a batched ListOffsets for
the end of every partition (and once a minute one for their log starts), and meanwhile
ListGroups, the groups described (and those no longer listed), then their committed
offsets: one request per group coordinator each (clusterclient's batched group reads; on
librdkafka's path for a security only it speaks, a request per group, all in flight at
once); then topic configs (min.insync.replicas) for
topics not seen before. For the built-in cluster also the supervisor's process states and
each running broker's Prometheus endpoint (bytes in/out, messages in, active controller,
each partition's log size).
"""

from __future__ import annotations

import logging
import math
import time
import urllib.request
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from brokercluster.client import BrokerProcess, NoSupervisor, SupervisorClient
from clusterclient import (
    EARLIEST,
    LATEST,
    ClusterClient,
    ClusterMetadata,
    ClusterRequestError,
    ClusterUnavailable,
    ConsumerGroup,
    GroupState,
    TopicPartition,
)

log = logging.getLogger(__name__)

# The brokers' all-topics meters (jmx_exporter names) and the controller gauge we read.
BROKER_COUNTERS = {
    "kafka_server_brokertopicmetrics_bytesin": "bytes_in",
    "kafka_server_brokertopicmetrics_bytesout": "bytes_out",
    "kafka_server_brokertopicmetrics_messagesin": "messages_in",
    "kafka_controller_kafkacontroller_activecontrollercount": "active_controller",
}
LOG_START_EVERY_S = 60.0
LOG_SIZE = "kafka_log_log_size"  # {topic, partition}: bytes of each log a broker holds
TOPIC_BYTES_IN = "topic_bytes_in:"  # + topic: that topic's bytes in, led by this broker


@dataclass
class Reading:
    """What one cycle read; `at` is the wall time (seconds) the offsets were read."""

    at: float
    metadata: ClusterMetadata
    log_start: dict[TopicPartition, int]
    log_end: dict[TopicPartition, int]
    groups: dict[str, ConsumerGroup]
    committed: dict[str, dict[TopicPartition, int]]
    min_isr: dict[str, int]
    processes: dict[int, BrokerProcess] | None = None  # None: not the built-in cluster
    broker_counters: dict[int, dict[str, float]] = field(default_factory=dict)
    log_size: dict[TopicPartition, int] = field(default_factory=dict)  # the leader's, in bytes
    # Partitions whose offsets are the last good ones, not this cycle's (no answer).
    stale: frozenset[TopicPartition] = frozenset()
    # Groups whose description or committed offsets are the last good ones (no answer).
    stale_groups: frozenset[str] = frozenset()


@dataclass
class Scrape:
    """What one broker's Prometheus endpoint said."""

    counters: dict[str, float]
    log_size: dict[TopicPartition, int]  # every log it holds (kafka_log_log_size)


class Sampler:
    def __init__(self, client: ClusterClient, supervisor_dir: Path | None,
                 metrics_timeout: float = 2.0, probe_timeout: float | None = None) -> None:
        self.client = client
        self.probe_timeout = probe_timeout  # for Metadata, the request that says "reachable"
        self.supervisor = SupervisorClient(supervisor_dir, timeout=5.0) if supervisor_dir else None
        self.metrics_timeout = metrics_timeout
        self.min_isr: dict[str, int] = {}  # topic configs change rarely: read once per topic
        self.log_start: dict[TopicPartition, int] = {}  # the last good offsets
        self.log_end: dict[TopicPartition, int] = {}
        self.last_groups: tuple[dict[str, ConsumerGroup],
                                dict[str, dict[TopicPartition, int]]] | None = None
        self.log_start_read = -math.inf  # monotonic time all log starts were last read
        self._groups_read: Future[tuple[dict[str, ConsumerGroup],
                                        dict[str, dict[TopicPartition, int]],
                                        frozenset[str]]] | None = None
        # Supervisor status, one scrape per broker, the groups' reads.
        self.pool = ThreadPoolExecutor(8, thread_name_prefix="collector-io")

    def read(self) -> Reading:
        """Raises clusterclient.ClusterUnavailable when the cluster does not answer."""
        processes = self.pool.submit(self._processes)
        groups_read = self._start_groups_read()  # while Metadata and the offsets are read
        metadata = self.client.metadata(refresh=True, timeout=self.probe_timeout)
        procs = processes.result()
        scrapes = self._scrape_brokers(metadata, procs)  # in flight while offsets are read
        partitions = [TopicPartition(p.topic, p.partition) for p in metadata.partitions]
        at = time.time()
        fresh = self._read_log_ends([TopicPartition(p.topic, p.partition)
                                     for p in metadata.partitions if not p.offline])
        self._read_log_starts(fresh)
        self._forget(partitions)
        groups, committed, stale_groups = groups_read.result()
        self._groups_read = None
        self._read_min_isr(metadata)
        scraped = {n: found for n, f in scrapes.items() if (found := f.result()) is not None}
        return Reading(
            at=at, metadata=metadata, log_start=dict(self.log_start), log_end=dict(self.log_end),
            groups=groups, committed=committed,
            min_isr={t: self.min_isr.get(t, 1) for t in metadata.topics},
            processes=procs, broker_counters={n: s.counters for n, s in scraped.items()},
            log_size=_leaders_sizes(metadata, scraped),
            stale=frozenset(tp for tp in partitions if tp not in fresh),
            stale_groups=stale_groups,
        )

    def _start_groups_read(self) -> Future[tuple[dict[str, ConsumerGroup],
                                                  dict[str, dict[TopicPartition, int]],
                                                  frozenset[str]]]:
        """The groups' read, on the pool, from before the Metadata probe: the groups need
        no metadata, and at 1,000 groups and 10,000 partitions their four round trips took
        longer than the ListOffsets beside them. When the probe fails the read goes on by
        itself (bounded by the client's timeout); one still going when the next cycle
        starts is that cycle's groups read, never a second one queued behind it."""
        running = self._groups_read
        if running is None or running.done():
            running = self._groups_read = self.pool.submit(self._groups_or_last)
        return running

    def _read_log_ends(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """The end offsets that were answered this cycle. A partition without an answer (its
        leader just died, or it is offline) keeps its last good offsets: a failed answer
        is never mixed with a good one."""
        answer = self.client.list_offsets(dict.fromkeys(partitions, LATEST))
        if answer.errors:
            first = min(answer.errors)
            log.info("%d partitions without an end offset this cycle (%s: %s); their last good "
                     "offsets stay", len(answer.errors), first, answer.errors[first].code_name)
        fresh = {tp: o.offset for tp, o in answer.offsets.items()}
        self.log_end.update(fresh)
        return fresh

    def _read_log_starts(self, ends: dict[TopicPartition, int]) -> None:
        """Log start offsets of the partitions whose end was just read: all of them once a
        minute, and at once those not seen before or whose end fell below the start we knew
        (a topic deleted and created again). Only retention and DeleteRecords move a log
        start, and at 10,000 partitions a ListOffsets costs seconds of the interval."""
        due = time.monotonic() - self.log_start_read >= LOG_START_EVERY_S
        wanted = list(ends) if due else [
            tp for tp, end in ends.items() if self.log_start.get(tp, end + 1) > end]
        if wanted:
            found = self.client.list_offsets(dict.fromkeys(wanted, EARLIEST))
            self.log_start.update((tp, o.offset) for tp, o in found.offsets.items())
            if due:
                self.log_start_read = time.monotonic()
        for tp in wanted:  # a start past the end is an old topic's: better unknown than wrong
            if self.log_start.get(tp, 0) > ends[tp]:
                del self.log_start[tp]

    def _forget(self, partitions: list[TopicPartition]) -> None:
        current = set(partitions)
        for known in (self.log_start, self.log_end):
            for gone in [tp for tp in known if tp not in current]:
                del known[gone]

    def _groups_or_last(self) -> tuple[dict[str, ConsumerGroup],
                                       dict[str, dict[TopicPartition, int]], frozenset[str]]:
        """The groups, their committed offsets, and which of them are the last good ones: a
        broker that just died, or one loading its group partitions, leaves ListGroups (sent
        to every broker) or a group's coordinator without an answer while the cluster
        answers Metadata. That is a partial answer, not an unreachable cluster; the groups
        it leaves out keep their last good values (`_unlisted`)."""
        try:
            groups, committed, stale = self._groups()
        except (ClusterUnavailable, ClusterRequestError) as exc:
            if self.last_groups is None:
                raise
            log.info("consumer groups not read this cycle (%s); the last good ones stay", exc)
            return (*self.last_groups, frozenset(self.last_groups[0]))
        self.last_groups = groups, committed
        return groups, committed, stale

    def _groups(self) -> tuple[dict[str, ConsumerGroup], dict[str, dict[TopicPartition, int]],
                               frozenset[str]]:
        last_groups, last_committed = self.last_groups or ({}, {})
        listed = [g.group_id for g in self.client.list_groups()]
        # Described before their offsets are fetched, never meanwhile: on librdkafka's path
        # (batched_groups off, or a security only it speaks) librdkafka 2.16 crashes the
        # process when an admin OffsetFetch meets NOT_COORDINATOR (librdkafka #5040), so
        # OffsetFetch goes out only right after every coordinator answered DescribeGroups.
        described = self.client.describe_groups(listed)
        found, kept = self._unlisted(sorted(last_groups.keys() - set(listed)))
        offsets = self.client.committed_offsets_many(listed + list(found))
        committed = {g: last_committed.get(g, {}) for g in kept}
        stale = set(kept)
        for group_id, answer in offsets.items():
            committed[group_id] = answer.offsets
            if answer.error is not None:  # its coordinator died: its last good offsets stay
                log.warning("group %s: OffsetFetch failed: %s", group_id, answer.error)
                committed[group_id] = last_committed.get(group_id, {})
                stale.add(group_id)
        return {**described, **found, **kept}, committed, frozenset(stale)

    def _unlisted(self, missing: list[str]) -> tuple[dict[str, ConsumerGroup],
                                                      dict[str, ConsumerGroup]]:
        """Groups seen before and not listed now: (those that still exist, those kept as last
        seen). A group between coordinators is listed by no broker: its coordinator died, or
        the new one is loading its partition (ListGroups then answers
        COORDINATOR_LOAD_IN_PROGRESS) or has yet to take it. So each is asked for, and only
        a coordinator that answers it is Dead (deleted, or its offsets expired) removes it;
        without an answer it keeps its last good values."""
        if not missing:
            return {}, {}
        assert self.last_groups is not None
        try:
            described = self.client.describe_groups(missing)
        except (ClusterUnavailable, ClusterRequestError) as exc:
            log.info("%d group(s) neither listed nor described this cycle (%s); their last good "
                     "values stay", len(missing), exc)
            return {}, {g: self.last_groups[0][g] for g in missing}
        return {g: d for g, d in described.items() if d.state is not GroupState.DEAD}, {}

    def _read_min_isr(self, metadata: ClusterMetadata) -> None:
        for name in metadata.topics:
            if name in self.min_isr:
                continue
            try:
                entries = self.client.topic_configs(name)
            except ClusterRequestError as exc:
                log.info("topic %s: configs not readable (%s)", name, exc)
                self.min_isr[name] = 1
                continue
            value = next((e.value for e in entries if e.name == "min.insync.replicas"), None)
            self.min_isr[name] = int(value) if value and value.isdigit() else 1
        for gone in set(self.min_isr) - set(metadata.topics):
            del self.min_isr[gone]

    def _processes(self) -> dict[int, BrokerProcess] | None:
        if self.supervisor is None:
            return None
        try:
            status = self.supervisor.status(timeout=5.0)
        except (NoSupervisor, OSError, ValueError):
            return None
        return {b.node_id: b for b in status.brokers}

    def _scrape_brokers(self, metadata: ClusterMetadata,
                        processes: dict[int, BrokerProcess] | None
                        ) -> dict[int, Future[Scrape | None]]:
        if not processes:
            return {}
        hosts = {b.node_id: b.host for b in metadata.brokers}
        return {n: self.pool.submit(self._scrape, hosts[n], p.metrics_port)
                for n, p in processes.items() if p.alive and n in hosts}

    def _scrape(self, host: str, port: int) -> Scrape | None:
        url = f"http://{host}:{port}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=self.metrics_timeout) as response:
                text = response.read().decode()
        except OSError:
            return None
        found = Scrape({}, {})
        for family in text_string_to_metric_families(text):
            if family.name == LOG_SIZE:
                found.log_size.update(
                    (TopicPartition(s.labels["topic"], int(s.labels["partition"])), int(s.value))
                    for s in family.samples)
                continue
            name = BROKER_COUNTERS.get(family.name)
            for sample in family.samples if name else ():
                if sample.name not in (family.name, family.name + "_total"):
                    continue
                topic = sample.labels.get("topic")
                if topic is None:
                    found.counters[str(name)] = float(sample.value)
                elif name == "bytes_in":
                    found.counters[TOPIC_BYTES_IN + topic] = float(sample.value)
        return found

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


def _leaders_sizes(metadata: ClusterMetadata, scraped: dict[int, Scrape]
                   ) -> dict[TopicPartition, int]:
    """Each partition's log size as its leader reports it (one copy of the data)."""
    sizes = {}
    for topic in metadata.topics.values():
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition)
            size = scraped[p.leader].log_size.get(tp) if p.leader in scraped else None
            if size is not None:
                sizes[tp] = size
    return sizes
