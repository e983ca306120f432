"""Transactions on the 3-broker cluster while the transaction coordinator, then a partition
leader, are killed -9.

The transactional workload (`txn_workload.py`: transactions committed or aborted at random,
and consume-transform-produce with `send_offsets_to_transaction`) runs while the broker
coordinating the plain producer's transactional id is killed, which also takes away the
partitions it led, and restarted; then the leader of a partition on another broker is, and
restarted. The checker then holds the history against a read_committed read of the topic:
each committed transaction's records exactly once, no record of an aborted one, each
transaction whole or absent, and the group's offsets committed only with their outputs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from brokercore.coordinator.records import partition_for
from tests.brokerproc import ClusterProcess
from tests.cluster.checker import check
from tests.cluster.faults import FAST_FAILOVER, TOPIC_CONFIGS, ClusterView, wait_until
from tests.cluster.txn_workload import TxnWorkload
from tests.cluster.workload import create_topic
from tests.compat.clients import new_topic

PARTITIONS = 3
TXN_STATE_PARTITIONS = 4  # tests/brokerproc.py's transaction.state.log.num.partitions


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcess]:
    with ClusterProcess(tmp_path / "cluster", brokers=3, overrides=FAST_FAILOVER) as c:
        yield c


def _coordinator(view: ClusterView, transactional_id: str) -> int:
    """The transactional id's coordinator: the leader of its __transaction_state partition."""
    assert len(view.partitions("__transaction_state")) == TXN_STATE_PARTITIONS
    partition = partition_for(transactional_id, TXN_STATE_PARTITIONS)
    return wait_until("the transaction coordinator is known", lambda: max(
        view.partition("__transaction_state", partition).leader, 0))


def _kill_and_restart(cluster: ClusterProcess, victim: int, workload: TxnWorkload) -> None:
    cluster.kill(victim)
    workload.wait_for_commits(5)  # without the victim
    cluster.start(victim)
    workload.wait_for_commits(5)  # with it back


@pytest.mark.slow
def test_killing_the_coordinator_and_a_leader_loses_no_commit_and_shows_no_abort(
    cluster: ClusterProcess,
) -> None:
    topic = new_topic("txn-faults")
    create_topic(cluster.bootstrap, topic, PARTITIONS, 3, TOPIC_CONFIGS)
    view = ClusterView(cluster.bootstrap)
    view.fully_replicated(topic)
    workload = TxnWorkload(cluster.bootstrap, topic, PARTITIONS, seed=9).start()
    workload.wait_for_commits(5)
    transactional_id = workload.transactional_id("txn")
    _kill_and_restart(cluster, _coordinator(view, transactional_id), workload)
    coordinator = _coordinator(view, transactional_id)
    leader = wait_until("a partition led away from the coordinator", lambda: next(
        (v.leader for v in view.partitions(topic).values()
         if v.leader not in (coordinator, -1)), None))
    _kill_and_restart(cluster, leader, workload)
    history = workload.finish()

    assert not workload.errors, workload.errors
    assert workload.outcomes["committed"] >= 15 and workload.outcomes["aborted"] > 0
    report = check(history)
    assert report.valid, f"{workload.outcomes}, {history.summary()}\n{report}"
