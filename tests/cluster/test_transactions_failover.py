"""Transactions on the 3-broker cluster while the transaction coordinator, then a partition
leader, are killed -9.

A confluent-kafka transactional producer runs transactions across three partitions (every
third one aborted on purpose) and records each outcome. The coordinator's broker is killed
mid-run, which also takes away the partitions it led, and restarted; then the leader of a
partition on another broker is, and restarted. The checker
then reads everything back with read_committed: each committed transaction's records
exactly once, no record of an aborted one, and a transaction whose outcome the producer
could not learn either whole or absent.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka import KafkaException, TopicPartition

from brokercore.coordinator.records import partition_for
from tests.brokerproc import ClusterProcess
from tests.cluster.faults import FAST_FAILOVER, TOPIC_CONFIGS, ClusterView, wait_until
from tests.cluster.workload import create_topic
from tests.compat.clients import new_topic

PARTITIONS = 3
PER_TXN = 6
TXN_STATE_PARTITIONS = 4  # tests/brokerproc.py's transaction.state.log.num.partitions


@dataclass
class Outcomes:
    committed: set[int] = field(default_factory=set)
    aborted: set[int] = field(default_factory=set)
    unknown: set[int] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcess]:
    with ClusterProcess(tmp_path / "cluster", brokers=3, overrides=FAST_FAILOVER) as c:
        yield c


def _run_transactions(bootstrap: str, topic: str, transactional_id: str, stop: threading.Event,
                      outcomes: Outcomes) -> None:
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "transactional.id": transactional_id,
        "transaction.timeout.ms": 20000, "linger.ms": 5, "message.timeout.ms": 20000,
    })
    producer.init_transactions(60)
    n = 0
    while not stop.is_set():
        n += 1
        try:
            producer.begin_transaction()
            for i in range(PER_TXN):
                producer.produce(topic, value=f"{n}-{i}".encode(), partition=i % PARTITIONS)
            if n % 3 == 0:
                producer.flush(30)
                producer.abort_transaction(60)
                outcomes.aborted.add(n)
            else:
                producer.commit_transaction(60)
                outcomes.committed.add(n)
        except KafkaException as exc:
            error = exc.args[0]
            outcomes.errors.append(str(error))
            if error.fatal():
                outcomes.unknown.add(n)
                return
            try:  # abortable (or retriable) and not committed as far as we know: abort it
                producer.abort_transaction(60)
                outcomes.aborted.add(n)
            except KafkaException as again:
                outcomes.errors.append(str(again.args[0]))
                outcomes.unknown.add(n)
                return


def _read_committed(bootstrap: str, topic: str) -> list[bytes]:
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:8]}",
        "isolation.level": "read_committed", "enable.auto.commit": False,
    })
    consumer.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                     for p in range(PARTITIONS)])
    values: list[bytes] = []
    quiet_since = time.monotonic()
    while time.monotonic() - quiet_since < 5:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            values.append(msg.value())
            quiet_since = time.monotonic()
    consumer.close()
    return values


def _coordinator(view: ClusterView, transactional_id: str) -> int:
    """The transactional id's coordinator: the leader of its __transaction_state partition."""
    assert len(view.partitions("__transaction_state")) == TXN_STATE_PARTITIONS
    partition = partition_for(transactional_id, TXN_STATE_PARTITIONS)
    return wait_until("the transaction coordinator is known", lambda: max(
        view.partition("__transaction_state", partition).leader, 0))


def _kill_and_restart(cluster: ClusterProcess, victim: int, outcomes: Outcomes) -> None:
    before = len(outcomes.committed)
    cluster.kill(victim)
    wait_until(f"transactions commit without broker {victim}",
               lambda: len(outcomes.committed) >= before + 5 or outcomes.unknown, 90)
    cluster.start(victim)
    wait_until(f"transactions commit after broker {victim} restarted",
               lambda: len(outcomes.committed) >= before + 10 or outcomes.unknown, 90)


@pytest.mark.slow
def test_killing_the_coordinator_and_a_leader_loses_no_commit_and_shows_no_abort(
    cluster: ClusterProcess,
) -> None:
    topic = new_topic("txn-faults")
    create_topic(cluster.bootstrap, topic, PARTITIONS, 3, TOPIC_CONFIGS)
    view = ClusterView(cluster.bootstrap)
    view.fully_replicated(topic)
    transactional_id = f"faults-{uuid.uuid4().hex[:8]}"
    outcomes, stop = Outcomes(), threading.Event()
    worker = threading.Thread(target=_run_transactions, daemon=True, args=(
        cluster.bootstrap, topic, transactional_id, stop, outcomes))
    worker.start()
    wait_until("some transactions commit", lambda: len(outcomes.committed) >= 5)
    coordinator = _coordinator(view, transactional_id)
    _kill_and_restart(cluster, coordinator, outcomes)
    coordinator = _coordinator(view, transactional_id)
    leader = wait_until("a partition led away from the coordinator", lambda: next(
        (v.leader for v in view.partitions(topic).values()
         if v.leader not in (coordinator, -1)), None))
    _kill_and_restart(cluster, leader, outcomes)
    stop.set()
    worker.join(90)

    read = _read_committed(cluster.bootstrap, topic)
    counts = Counter(read)
    by_txn: dict[int, int] = Counter(int(v.split(b"-")[0]) for v in read)
    assert not [v for v, c in counts.items() if c > 1], "duplicates read"
    assert not outcomes.aborted & set(by_txn), "records of aborted transactions read"
    assert all(by_txn.get(n) == PER_TXN for n in outcomes.committed), "committed records lost"
    assert all(by_txn.get(n, 0) in (0, PER_TXN) for n in outcomes.unknown), "a partial txn"
    assert set(by_txn) <= outcomes.committed | outcomes.unknown
