"""A randomized fault schedule (`make faults`): several rounds of random faults under load.

Each round picks a fault (kill -9, SIGTERM, SIGSTOP past the session timeout, the active
controller, a partition leader), lets the workload run through it, heals it, and waits
until every replica is back in sync. Beside the idempotent workload, a transactional one
(`txn_workload.py`: random commits and aborts, consume-transform-produce) runs on a topic of
its own, and its history goes through the same checker, which knows transactions. The
seed is printed; `FAULTS_SEED=n` replays one.
"""

from __future__ import annotations

import os
import random
from functools import partial
from pathlib import Path

import pytest

from tests.brokerproc import ClusterProcess
from tests.cluster.checker import check
from tests.cluster.faults import FAST_FAILOVER, TOPIC_CONFIGS, ClusterView, wait_until
from tests.cluster.txn_workload import TxnWorkload
from tests.cluster.workload import Workload, create_topic
from tests.compat.clients import new_topic

PARTITIONS = 4
ROUNDS = int(os.environ.get("FAULTS_ROUNDS", "8"))
FAULTS = ("kill", "stop", "pause", "kill-controller", "kill-leader")


@pytest.mark.faults
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_random_faults_lose_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seed = int(os.environ.get("FAULTS_SEED", random.randrange(1 << 32)))
    rng = random.Random(seed)
    with capsys.disabled():
        print(f"\n    fault schedule seed {seed}, {ROUNDS} rounds")
    with ClusterProcess(tmp_path / "cluster", brokers=3, overrides=FAST_FAILOVER) as cluster:
        topic, txn_topic = new_topic("schedule"), new_topic("schedule-txn")
        view = ClusterView(cluster.bootstrap)
        for name in (topic, txn_topic):
            create_topic(cluster.bootstrap, name, PARTITIONS, 3, TOPIC_CONFIGS)
            view.fully_replicated(name)
        workload = Workload(cluster.bootstrap, topic, PARTITIONS).start()
        transactions = TxnWorkload(cluster.bootstrap, txn_topic, PARTITIONS, seed).start()
        workload.wait_for_acks(100)
        transactions.wait_for_commits(10)
        for round_ in range(ROUNDS):
            fault = rng.choice(FAULTS)
            if fault == "kill-controller":
                victim = cluster.status()["active_controller"] or rng.randint(1, 3)
            elif fault == "kill-leader":
                victim = view.partition(topic, rng.randrange(PARTITIONS)).leader
            else:
                victim = rng.randint(1, 3)
            with capsys.disabled():
                print(f"    round {round_}: {fault} broker {victim}")
            if fault == "pause":
                cluster.pause(victim)
                wait_until(f"broker {victim} is fenced",
                           partial(view.fenced, topic, victim))
            elif fault == "stop":
                cluster.stop(victim)
            else:
                cluster.kill(victim)
            workload.wait_for_acks(rng.randint(50, 200))
            if fault == "pause":
                cluster.resume(victim)
            else:
                cluster.start(victim)
            view.fully_replicated(topic)
            workload.wait_for_acks(50)
            transactions.wait_for_commits(5)
        history = workload.finish()
        txn_history = transactions.finish()
    report, txn_report = check(history), check(txn_history)
    with capsys.disabled():
        print(f"    transactions: {transactions.outcomes}, {txn_history.summary()}; "
              f"anomalies: idempotent {report.found()}, transactional {txn_report.found()}")
    assert report.valid, f"seed {seed}: {history.summary()}\n{report}"
    assert txn_report.valid, f"seed {seed}: {txn_history.summary()}\n{txn_report}"
    assert not workload.errors, workload.errors
    assert not transactions.errors, transactions.errors
