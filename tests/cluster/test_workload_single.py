"""The workload against one built-in broker: the checker finds nothing, until data is lost."""

from __future__ import annotations

from collections.abc import Callable

from tests.brokerproc import BrokerProcess
from tests.cluster.checker import check
from tests.cluster.txn_workload import TxnWorkload
from tests.cluster.workload import Workload, create_topic, final_read
from tests.compat.clients import new_topic

PARTITIONS = 3


def test_all_three_idempotent_producers_and_a_group_leave_a_clean_history(
    kafka_bootstrap: str,
) -> None:
    topic = new_topic("history")
    create_topic(kafka_bootstrap, topic, PARTITIONS, 1)
    workload = Workload(kafka_bootstrap, topic, PARTITIONS).start()
    workload.wait_for_acks(300)
    history = workload.finish()
    assert not workload.errors, workload.errors
    assert {w.process for w in history.acked()} == {"confluent", "kafka-python", "aiokafka"}
    assert {r.process for r in history.reads} >= {"group-confluent"}
    report = check(history)
    assert report.valid, f"{history.summary()}\n{report}"


def test_transactions_and_consume_transform_produce_leave_a_clean_history(
    kafka_bootstrap: str,
) -> None:
    topic = new_topic("txn-history")
    create_topic(kafka_bootstrap, topic, PARTITIONS, 1)
    workload = TxnWorkload(kafka_bootstrap, topic, PARTITIONS, seed=14).start()
    workload.wait_for_commits(40)
    history = workload.finish()
    assert not workload.errors, workload.errors
    assert {w.process for w in history.acked()} == {"txn", "ctp"}
    assert {w.process for w in history.all_writes() if w.status == "fail"} == {"txn", "ctp"}
    assert history.derived and any(history.committed_offsets.values())  # type: ignore[union-attr]
    report = check(history)
    assert report.valid, f"{history.summary()}\n{report}"


def test_the_checker_notices_acked_writes_the_broker_lost(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory()
    topic = new_topic("lossy")
    create_topic(broker.bootstrap, topic, PARTITIONS, 1)
    workload = Workload(broker.bootstrap, topic, PARTITIONS, consumers=()).start()
    workload.wait_for_acks(60)
    history = workload.finish()
    assert check(history).valid
    broker.stop()
    # Lose the second half of partition 0's log, as a broker that acked too early would.
    [segment] = (broker.data_dir / "logs" / f"{topic}-0").glob("*.log")
    segment.write_bytes(segment.read_bytes()[: segment.stat().st_size // 2])
    broker.start()
    history.final_read(final_read(broker.bootstrap, topic, PARTITIONS))
    report = check(history)
    assert list(report.found()) == ["lost"], str(report)
