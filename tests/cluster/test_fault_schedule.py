"""A randomized fault schedule (`make faults`): several rounds of random faults under load.

Each round picks a fault (kill -9, SIGTERM, SIGSTOP past the session timeout, the active
controller, a partition leader), lets the workload run through it, heals it, and waits
until every replica is back in sync, the internal topics' too. Beside the idempotent
workload, a transactional one (`txn_workload.py`: random commits and aborts,
consume-transform-produce) runs on a topic of its own, and its history goes through the
same checker, which knows transactions. The seed is printed; `FAULTS_SEED=n` replays one.

A run that fails, or has a phase (a round, or the workloads' finish) slower than
`SLOW_PHASE_S`, keeps the brokers' and the supervisor's logs in `var/faults/<seed>/`, with
`phases.txt` listing each phase's duration and what made the run worth keeping.
"""

from __future__ import annotations

import os
import random
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import pytest

from tests.brokerproc import REPO, ClusterProcess
from tests.cluster.checker import check
from tests.cluster.faults import FAST_FAILOVER, TOPIC_CONFIGS, ClusterView, wait_until
from tests.cluster.txn_workload import TxnWorkload
from tests.cluster.workload import Workload, create_topic
from tests.compat.clients import new_topic

PARTITIONS = 4
ROUNDS = int(os.environ.get("FAULTS_ROUNDS", "8"))
FAULTS = ("kill", "stop", "pause", "kill-controller", "kill-leader")
SLOW_PHASE_S = float(os.environ.get("FAULTS_SLOW_PHASE_S", "150"))
KEPT_LOGS = REPO / "var" / "faults"


class Phases:
    """How long each phase of the run took; whether the run is worth keeping logs of."""

    def __init__(self, seed: int, slow_after: float = SLOW_PHASE_S,
                 kept: Path = KEPT_LOGS) -> None:
        self.seed = seed
        self.slow_after = slow_after
        self.kept = kept
        self.lines: list[str] = []
        self.slow: list[str] = []

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            took = time.monotonic() - started
            self.lines.append(f"{name}: {took:.1f} s")
            if took > self.slow_after:
                self.slow.append(f"{name} took {took:.1f} s (more than {self.slow_after:g} s)")

    def keep_logs(self, cluster_dir: Path, failure: BaseException | None) -> Path | None:
        """Copy the cluster's logs to var/faults/<seed>/ if the run failed or was slow."""
        reasons = [*self.slow, *([f"failed: {failure!r}"] if failure is not None else [])]
        if not reasons:
            return None
        target = self.kept / str(self.seed)
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(cluster_dir / "logs", target / "logs", dirs_exist_ok=True)
        shutil.copy2(cluster_dir / "supervisor.out", target / "supervisor.out")
        (target / "phases.txt").write_text("\n".join([*reasons, "", *self.lines, ""]))
        return target


@pytest.mark.faults
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_random_faults_lose_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seed = int(os.environ.get("FAULTS_SEED", random.randrange(1 << 32)))
    with capsys.disabled():
        print(f"\n    fault schedule seed {seed}, {ROUNDS} rounds")
    phases = Phases(seed)
    failure: BaseException | None = None
    try:
        _run_schedule(tmp_path / "cluster", seed, phases, capsys)
    except BaseException as exc:  # the pytest-timeout's too: keep the logs of a hang
        failure = exc
        raise
    finally:
        kept = phases.keep_logs(tmp_path / "cluster", failure)
        with capsys.disabled():
            print(f"    phases: {', '.join(phases.lines)}")
            if kept is not None:
                print(f"    logs kept in {kept}: {'; '.join(phases.slow) or 'failed'}")


def _run_schedule(cluster_dir: Path, seed: int, phases: Phases,
                  capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(seed)
    with ClusterProcess(cluster_dir, brokers=3, overrides=FAST_FAILOVER) as cluster:
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
            with phases.timed(f"round {round_} ({fault} broker {victim})"):
                _fault_round(cluster, view, (topic, txn_topic), fault, victim, rng, workload,
                             transactions)
        with phases.timed("the workloads' finish"):
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


def _fault_round(cluster: ClusterProcess, view: ClusterView, topics: tuple[str, str],
                 fault: str, victim: int, rng: random.Random, workload: Workload,
                 transactions: TxnWorkload) -> None:
    topic = topics[0]
    if fault == "pause":
        cluster.pause(victim)
        wait_until(f"broker {victim} is fenced", partial(view.fenced, topic, victim))
    elif fault == "stop":
        cluster.stop(victim)
    else:
        cluster.kill(victim)
    workload.wait_for_acks(rng.randint(50, 200))
    if fault == "pause":
        cluster.resume(victim)
    else:
        cluster.start(victim)
    # The internal topics too: a replica of a group's or a transaction's partition left out
    # of sync would make the next fault take its coordinator below min.insync.replicas.
    for name in (*topics, "__consumer_offsets", "__transaction_state"):
        view.fully_replicated(name)
    workload.wait_for_acks(50)
    transactions.wait_for_commits(5)


def test_a_failed_or_slow_run_keeps_the_logs_and_a_clean_one_does_not(tmp_path: Path) -> None:
    cluster_dir = tmp_path / "cluster"
    (cluster_dir / "logs").mkdir(parents=True)
    (cluster_dir / "logs" / "broker-1.log").write_text("node 1: ready\n")
    (cluster_dir / "supervisor.out").write_text("millrace cluster ready\n")

    clean = Phases(1, slow_after=60, kept=tmp_path / "kept")
    with clean.timed("round 0"):
        pass
    assert clean.keep_logs(cluster_dir, None) is None
    assert not (tmp_path / "kept").exists()

    failed = clean.keep_logs(cluster_dir, AssertionError("no transactional progress"))
    assert failed == tmp_path / "kept" / "1"
    assert "no transactional progress" in (failed / "phases.txt").read_text()

    slow = Phases(2, slow_after=0, kept=tmp_path / "kept")
    with slow.timed("round 0 (kill broker 3)"):
        time.sleep(0.01)
    kept = slow.keep_logs(cluster_dir, None)
    assert kept is not None
    assert (kept / "logs" / "broker-1.log").read_text() == "node 1: ready\n"
    assert (kept / "supervisor.out").exists()
    assert "round 0 (kill broker 3) took" in (kept / "phases.txt").read_text()
