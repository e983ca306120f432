"""`python manage.py failover_demo`: a producer to watch while you kill a broker.

Produces numbered messages with an idempotent, acks=all confluent-kafka producer, prints
once a second what was acknowledged and where each partition's leader and ISR are (from
fresh Metadata, marking what moved), and on Ctrl-C, SIGTERM or the end of `--duration`
reads the whole topic back and counts what was lost or duplicated. It exits 0 only when
every acknowledged message was read back exactly once.

Like a Unix tool, it stops producing when its stdout goes away (`| head -2`, a `| tee`
ended by the same Ctrl-C); it then still drains, reads back and checks, writes the rest,
the summary included, to stderr, and its exit status keeps its meaning (0 clean, 1 lost or
duplicated, 2 cluster unreachable).

It reaches the brokers through confluent-kafka only, like the rest of the control center,
so it runs the same against the built-in cluster and an external Kafka cluster.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser, OutputWrapper

from clusterclient import ClusterClient, ClusterMetadata, ClusterRequestError, ClusterUnavailable

# Exit status when the cluster cannot be reached or the topic cannot be set up: not 1, which
# means "acknowledged messages were lost or duplicated".
EXIT_UNAVAILABLE = 2
METADATA_TIMEOUT = 5.0
# librdkafka logs every refused connection; the newcomer sees errors in the status lines.
QUIET = {"log_level": 2}


@dataclass(frozen=True)
class PartitionState:
    leader: int
    isr: tuple[int, ...]


@dataclass
class Deliveries:
    """What the brokers answered about this run's messages. Only the producer's poll
    thread writes here; the reporter reads the counters."""

    acked: set[int] = field(default_factory=set)
    failed: int = 0
    last_error: str = ""

    def on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is None:
            self.acked.add(int(msg.value().rsplit(b":", 1)[1]))
        else:
            self.failed += 1
            self.last_error = err.name()


@dataclass(frozen=True)
class ReadBack:
    acknowledged: int
    read_back: int
    lost: list[int]
    duplicated: int
    unacknowledged_present: int

    @property
    def clean(self) -> bool:
        return not self.lost and self.duplicated == 0


class Output:
    """Lines for stdout until it goes away (EPIPE), then for stderr.

    Two threads write (the reporter and the main one); `closed` tells the run to stop.
    Once the pipe is gone, fd 1 is pointed at /dev/null so that nothing (Python's own
    flush at exit included) meets the broken pipe again."""

    def __init__(self, stdout: OutputWrapper, stderr: OutputWrapper) -> None:
        self.stdout, self.stderr = stdout, stderr
        self.closed = threading.Event()
        self._lock = threading.Lock()

    def write(self, line: str) -> None:
        with self._lock:
            if not self.closed.is_set():
                try:
                    self.stdout.write(line)
                    self.stdout.flush()
                    return
                except BrokenPipeError:
                    self._lost_stdout()
                    return  # that line was for the reader who left
            self.stderr.write(line)
            self.stderr.flush()

    def flush(self) -> None:
        """Each write flushes already (the API Django's OutputWrapper offers)."""

    def _lost_stdout(self) -> None:
        self.closed.set()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self.stdout.fileno())
        os.close(devnull)
        self.stderr.write("stdout was closed: stopping, then checking what was acknowledged")


class Command(BaseCommand):
    help = ("Produce to a replicated topic and print leaders and ISRs once a second; on "
            "Ctrl-C, read it all back and report lost and duplicated messages.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--bootstrap", default=None,
                            help="bootstrap servers (default: KAFKA_BOOTSTRAP_SERVERS)")
        parser.add_argument("--topic", default="failover-demo")
        parser.add_argument("--partitions", type=int, default=3,
                            help="partitions, when the topic is created")
        parser.add_argument("--rate", type=float, default=200.0, help="messages per second")
        parser.add_argument("--duration", type=float, default=None,
                            help="seconds to produce (default: until Ctrl-C)")

    def handle(self, *args: Any, **opts: Any) -> None:
        self.out = Output(self.stdout, self.stderr)
        bootstrap: str = opts["bootstrap"] or settings.KAFKA_BOOTSTRAP_SERVERS
        if opts["partitions"] < 1 or opts["rate"] <= 0:
            raise CommandError("--partitions and --rate must be positive", returncode=2)
        admin = ClusterClient(bootstrap, QUIET, timeout=METADATA_TIMEOUT)
        metadata = self._connect(admin, bootstrap)
        topic: str = opts["topic"]
        partitions = self._ensure_topic(admin, metadata, topic, opts["partitions"])
        run = DemoRun(self, bootstrap, topic, partitions, opts["rate"])
        deliveries = run.produce(opts["duration"])
        report = run.read_back(deliveries)
        self._report(report)
        if not report.clean:
            raise CommandError("acknowledged messages were lost or duplicated", returncode=1)

    def _metadata(self, admin: ClusterClient) -> ClusterMetadata:
        try:
            return admin.metadata(refresh=True)
        except (ClusterUnavailable, ClusterRequestError) as exc:
            raise CommandError(f"no Metadata from the cluster: {exc}",
                               returncode=EXIT_UNAVAILABLE) from exc

    def _connect(self, admin: ClusterClient, bootstrap: str) -> ClusterMetadata:
        try:
            metadata = admin.metadata(refresh=True)
        except (ClusterUnavailable, ClusterRequestError) as exc:
            raise CommandError(
                f"cannot reach a broker at {bootstrap} within {METADATA_TIMEOUT:.0f} s "
                f"({exc.code_name}). Is the platform running (`make run`)? Pass --bootstrap "
                "or set KAFKA_BOOTSTRAP_SERVERS.", returncode=EXIT_UNAVAILABLE) from exc
        self.out.write(f"Cluster {metadata.cluster_id}: {len(metadata.brokers)} broker(s): "
                          + ", ".join(f"{b.node_id} at {b.address}" for b in metadata.brokers))
        return metadata

    def _ensure_topic(self, admin: ClusterClient, metadata: ClusterMetadata, topic: str,
                      partitions: int) -> int:
        """The topic's partition count, once every partition has a leader. (Each metadata
        read may come from another broker, so the count is taken from the read that showed
        the topic, never from a later one that may not have seen it yet.)"""
        existing = metadata.topics.get(topic)
        if existing is not None and existing.error is None:
            self.out.write(f"Using the existing topic {topic}: {len(existing.partitions)} "
                              f"partitions, replication factor {existing.replication_factor}")
            return len(existing.partitions)
        brokers = len(metadata.brokers)
        rf, min_isr = min(3, brokers), (2 if brokers > 1 else 1)
        try:
            admin.create_topic(topic, partitions, rf, {"min.insync.replicas": str(min_isr)})
        except (ClusterUnavailable, ClusterRequestError) as exc:
            if getattr(exc, "code_name", None) != "TOPIC_ALREADY_EXISTS":
                raise CommandError(f"cannot create topic {topic}: {exc}",
                                   returncode=EXIT_UNAVAILABLE) from exc
        self.out.write(f"Created topic {topic}: {partitions} partitions, replication "
                          f"factor {rf}, min.insync.replicas={min_isr}")
        return self._wait_for_leaders(admin, topic)

    def _wait_for_leaders(self, admin: ClusterClient, topic: str, timeout: float = 30) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self._metadata(admin).topics.get(topic)
            if (found is not None and found.error is None and found.partitions
                    and not any(p.offline for p in found.partitions)):
                return len(found.partitions)
            time.sleep(0.2)
        raise CommandError(f"topic {topic} has partitions without a leader after "
                           f"{timeout:.0f} s", returncode=EXIT_UNAVAILABLE)

    def _report(self, report: ReadBack) -> None:
        self.out.write(
            f"acknowledged {report.acknowledged}, read back {report.read_back}, "
            f"lost {len(report.lost)}, duplicated {report.duplicated}")
        if report.unacknowledged_present:
            # acks=all can time out after the write reached the log: not a loss, not a dup.
            self.out.write(f"({report.unacknowledged_present} written whose ack never "
                              "arrived; Kafka does not promise either way for those)")
        if report.lost:
            self.out.write(f"lost sequence numbers (first 20): {report.lost[:20]}")
        self.out.write("OK: no acknowledged message lost or duplicated" if report.clean
                          else "FAILED: see above")


class DemoRun:
    """One run: its id prefixes every value so earlier runs on the topic do not count."""

    def __init__(self, command: Command, bootstrap: str, topic: str, partitions: int,
                 rate: float) -> None:
        self.out = command.out
        # The status line reads metadata every second: a short timeout keeps it ticking.
        self.admin = ClusterClient(bootstrap, QUIET, timeout=METADATA_TIMEOUT / 5)
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.run_id = uuid.uuid4().hex[:12]
        self.sent = 0
        self.client_error = ""
        self.stop = threading.Event()

    def produce(self, duration: float | None) -> Deliveries:
        deliveries = Deliveries()
        producer = Producer({
            "bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
            "linger.ms": 5, "error_cb": self._on_client_error, **QUIET,
        })
        previous = {sig: signal.signal(sig, lambda *_: self.stop.set())
                    for sig in (signal.SIGINT, signal.SIGTERM)}
        until = "Ctrl-C" if duration is None else f"{duration:g} s"
        self.out.write(f"Producing {self.rate:g} msg/s to {self.topic} (run {self.run_id}) "
                       f"until {until}; kill a broker from another terminal.")
        reporter = threading.Thread(target=self._report_every_second, args=(deliveries,),
                                    name="failover-demo-reporter", daemon=True)
        reporter.start()
        try:
            self._produce_until_stopped(producer, deliveries, duration)
        finally:
            self.stop.set()
            reporter.join()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        self._drain(producer)
        return deliveries

    def _produce_until_stopped(self, producer: Producer, deliveries: Deliveries,
                               duration: float | None) -> None:
        started = time.monotonic()
        while not self.stop.is_set() and not self.out.closed.is_set():
            elapsed = time.monotonic() - started
            if duration is not None and elapsed >= duration:
                return
            while self.sent < int(elapsed * self.rate) + 1:
                try:
                    producer.produce(self.topic, f"{self.run_id}:{self.sent}".encode(),
                                     partition=self.sent % self.partitions,
                                     on_delivery=deliveries.on_delivery)
                except BufferError:
                    break  # the queue is full while a leader is missing: wait for it
                except KafkaException as exc:
                    # A fatal error (the idempotent producer was fenced, say): nothing more
                    # can be sent, but what was acknowledged is still worth checking.
                    self.out.write(f"The producer cannot go on: {exc.args[0]}")
                    return
                self.sent += 1
            producer.poll(0.01)

    def _drain(self, producer: Producer) -> None:
        self.out.write("Stopping: waiting for the last acknowledgements ...")
        left = producer.flush(30)
        if left:
            # Their fate is unknown: purged, they count as failed, never as acknowledged.
            self.out.write(f"{left} still unacknowledged after 30 s; giving up on them")
            producer.purge()
            producer.flush(5)

    def _on_client_error(self, err: KafkaError) -> None:
        self.client_error = err.name()

    def _report_every_second(self, deliveries: Deliveries) -> None:
        started = time.monotonic()
        last: dict[int, PartitionState] = {}
        while not self.stop.wait(1.0) and not self.out.closed.is_set():
            states = self._partition_states()
            parts = [describe(p, last.get(p), state) for p, state in sorted(states.items())]
            last.update(states)
            failed = f"failed {deliveries.failed}"
            if deliveries.failed:
                failed += f" ({deliveries.last_error})"
            line = (f"{time.monotonic() - started:5.0f}s  sent {self.sent}  "
                    f"acked {len(deliveries.acked)}  "
                    f"{failed}  | " + "  ".join(parts or ["no metadata"]))
            if self.client_error:
                line += f"  [client: {self.client_error}]"
                self.client_error = ""
            self.out.write(line)
            self.out.flush()

    def _partition_states(self) -> dict[int, PartitionState]:
        try:
            found = self.admin.metadata(refresh=True)
        except (ClusterUnavailable, ClusterRequestError):
            return {}
        topic = found.topics.get(self.topic)
        if topic is None or topic.error is not None:
            return {}
        return {p.partition: PartitionState(p.leader, tuple(sorted(p.isr)))
                for p in topic.partitions}

    def read_back(self, deliveries: Deliveries) -> ReadBack:
        """Read every partition from its start to its end offset now: no group, no commits."""
        self.out.write(f"Reading {self.topic} back ...")
        # confluent-kafka insists on a group.id, but assign() never joins the group and
        # nothing is committed, so no group state is left behind.
        consumer = Consumer({"bootstrap.servers": self.bootstrap,
                             "group.id": f"failover-demo-{self.run_id}",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             **QUIET})
        try:
            seen = self._consume_to_end(consumer)
        finally:
            consumer.close()
        return compare(deliveries.acked, seen)

    def _consume_to_end(self, consumer: Consumer) -> Counter[int]:
        offsets = {p: self._offsets(consumer, p) for p in range(self.partitions)}
        ends = {p: end for p, (_, end) in offsets.items()}
        remaining = {p for p, (start, end) in offsets.items() if end > start}
        consumer.assign([TopicPartition(self.topic, p, offsets[p][0]) for p in remaining])
        prefix = f"{self.run_id}:".encode()
        seen: Counter[int] = Counter()
        deadline = time.monotonic() + 120
        while remaining and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error() is not None:
                continue
            value = msg.value()
            if value is not None and value.startswith(prefix):
                seen[int(value[len(prefix):])] += 1
            if msg.offset() + 1 >= ends[msg.partition()]:
                remaining.discard(msg.partition())
        if remaining:
            raise CommandError(f"could not read partitions {sorted(remaining)} to their end "
                               "in 120 s", returncode=EXIT_UNAVAILABLE)
        return seen

    def _offsets(self, consumer: Consumer, partition: int) -> tuple[int, int]:
        """The partition's log start and end (high watermark) offsets."""
        tp = TopicPartition(self.topic, partition)
        for _ in range(10):  # a leader may have just moved: ask again
            try:
                start, end = consumer.get_watermark_offsets(tp, timeout=5)
                return int(start), int(end)
            except KafkaException:
                time.sleep(1)
        raise CommandError(f"no offsets for partition {partition}",
                           returncode=EXIT_UNAVAILABLE)


def compare(acked: set[int], seen: Counter[int]) -> ReadBack:
    """What was acknowledged against what was read back (sequence number -> times read)."""
    return ReadBack(
        acknowledged=len(acked), read_back=len(seen),
        lost=sorted(acked - seen.keys()),
        duplicated=sum(count - 1 for count in seen.values()),
        unacknowledged_present=len(seen.keys() - acked))


def describe(partition: int, before: PartitionState | None, now: PartitionState) -> str:
    """`p1 leader 2→3 isr 1,3`: an arrow wherever something changed since the last line."""
    def moved(old: str, new: str) -> str:
        return new if old == new else f"{old}→{new}"

    def leader(state: PartitionState) -> str:
        return str(state.leader) if state.leader >= 0 else "none"

    def isr(state: PartitionState) -> str:
        return ",".join(map(str, state.isr)) or "-"

    if before is None:
        return f"p{partition} leader {leader(now)} isr {isr(now)}"
    return (f"p{partition} leader {moved(leader(before), leader(now))} "
            f"isr {moved(isr(before), isr(now))}")
