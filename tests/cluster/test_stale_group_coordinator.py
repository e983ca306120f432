"""The transactional workload's producer when its cached group coordinator dies and leaves
the Metadata broker list: `send_offsets_to_transaction` must come back (librdkafka issues
#5456 and #5511; `txn_workload.py` explains the stall and the setting that ends it).

The coordinator is killed right after a first `send_offsets_to_transaction`, so the next
AddOffsetsToTxn writes nothing and the TxnOffsetCommit waits on the dead broker at once. A
200 ms reconnect backoff makes the client ask FindCoordinator once a second until the broker
is fenced, and a 100 ms metadata refresh ends the broker's thread right after the fencing, so
the last answer naming the dead broker usually falls within a second of it: the window of
the stall. Without `connections.max.idle.ms` the call never returned in 6 runs of 6; with
it, the test passed 4 times of 4 in about 15 s. Part of `make faults`, not of the default run.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka import TopicPartition

from brokercore.coordinator.records import partition_for
from tests.brokerproc import ClusterProcess
from tests.cluster.faults import FAST_FAILOVER, TOPIC_CONFIGS, ClusterView, wait_until
from tests.cluster.txn_workload import TIMEOUT, producer_config
from tests.cluster.workload import create_topic
from tests.compat.clients import new_topic

PARTITIONS = 3
OFFSETS_PARTITIONS = 4  # tests/brokerproc.py's offsets.topic.num.partitions
RETURNS_WITHIN = 45.0  # seconds: the call's own 10 s, the fencing, an idle period, slack


@pytest.mark.faults
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_send_offsets_returns_after_the_group_coordinator_leaves_the_broker_list(
    tmp_path: Path,
) -> None:
    with ClusterProcess(tmp_path / "cluster", brokers=3, overrides=FAST_FAILOVER) as cluster:
        topic, group = new_topic("offsets"), f"ctp-{uuid.uuid4().hex[:8]}"
        create_topic(cluster.bootstrap, topic, PARTITIONS, 3, TOPIC_CONFIGS)
        view = ClusterView(cluster.bootstrap)
        view.fully_replicated(topic)
        consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap,
                                             "group.id": group, "enable.auto.commit": False})
        producer = confluent_kafka.Producer({
            **producer_config(cluster.bootstrap, f"ctp-{uuid.uuid4().hex[:8]}", "ctp"),
            "reconnect.backoff.ms": 200, "reconnect.backoff.max.ms": 200,
            "topic.metadata.refresh.interval.ms": 100, "metadata.max.age.ms": 60_000,
        })
        producer.init_transactions(TIMEOUT)

        def transaction(partition: int) -> list[TopicPartition]:
            """Begin one, with a record and the group's offsets: the offsets."""
            producer.begin_transaction()
            producer.produce(topic, b"v", partition=partition)
            producer.flush(TIMEOUT)
            offsets = [TopicPartition(topic, partition, 1)]
            producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(),
                                                 TIMEOUT)
            return offsets

        transaction(0)  # creates __consumer_offsets
        producer.commit_transaction(TIMEOUT)
        coordinator = view.partition("__consumer_offsets",
                                     partition_for(group, OFFSETS_PARTITIONS)).leader
        # The group's partition is in the transaction and its coordinator cached: after the
        # kill, AddOffsetsToTxn writes nothing and TxnOffsetCommit waits on the dead broker.
        offsets = transaction(next(
            p for p, v in view.partitions(topic).items() if v.leader != coordinator))
        cluster.kill(coordinator)
        outcome: list[str] = []

        def send_offsets() -> None:
            try:
                producer.send_offsets_to_transaction(
                    offsets, consumer.consumer_group_metadata(), 10)
                outcome.append("sent")
            except confluent_kafka.KafkaException as exc:
                outcome.append(str(exc))

        call = threading.Thread(target=send_offsets, daemon=True)  # left behind if it hangs
        call.start()
        wait_until(f"broker {coordinator} leaves the broker list",
                   lambda: coordinator not in view.live_brokers())
        call.join(RETURNS_WITHIN)
        assert outcome, (f"send_offsets_to_transaction has not returned {RETURNS_WITHIN:g} s "
                         f"after its coordinator, broker {coordinator}, was killed")
        consumer.close()
