"""A partition's leadership moving to a broker that a client's metadata does not list yet.

kafka-python fetches at v12. Kafka names the current leader in a Fetch answer only from
v16, where `node_endpoints` says how to reach it; a v12 client that is told nothing asks
Metadata for the new leader. Our broker once named it at v12 too, and kafka-python then
fetched from a node id it had no address for and raised UnknownBrokerIdError out of `poll`
(the fault schedule's seed 1); or, as here, logged it from the position check that a new
leader epoch starts, and recovered once its Metadata answer came.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import confluent_kafka
import kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.brokerproc import ClusterProcess
from tests.cluster.faults import FAST_FAILOVER, TOPIC_CONFIGS, ClusterView, wait_until
from tests.compat.clients import new_topic


def produce(bootstrap: str, topic: str, values: list[str]) -> None:
    # Idempotent: a retry after leadership moved mid-write (seen under load) must not
    # write the values twice; what is tested is where the consumer reads them.
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                         "enable.idempotence": True,
                                         "message.timeout.ms": 60_000})
    for value in values:
        producer.produce(topic, value.encode(), partition=0)
    assert producer.flush(60) == 0


def read(consumer: kafka.KafkaConsumer, count: int, timeout: float = 60.0) -> list[str]:
    values: list[str] = []
    deadline = time.monotonic() + timeout
    while len(values) < count:
        assert time.monotonic() < deadline, f"read {values} of {count}"
        for records in consumer.poll(timeout_ms=200).values():
            values += [r.value.decode() for r in records]
    return values


@pytest.mark.slow
def test_kafka_python_follows_the_leader_to_a_broker_it_has_not_met(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="kafka")
    with ClusterProcess(tmp_path / "cluster", brokers=3, overrides=FAST_FAILOVER) as cluster:
        topic = new_topic("hints")
        view = ClusterView(cluster.bootstrap)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(topic, 1, replica_assignment=[[3, 1, 2]],
                                      config=TOPIC_CONFIGS)])[topic].result(30)
        view.fully_replicated(topic)
        cluster.stop(3)
        wait_until("broker 3 is out of the cluster", lambda: 3 not in view.live_brokers())
        produce(cluster.bootstrap, topic, ["a", "b"])

        # It learns the cluster without broker 3, and asks again only when told to.
        consumer = kafka.KafkaConsumer(bootstrap_servers=cluster.bootstrap_of(1),
                                       auto_offset_reset="earliest", enable_auto_commit=False,
                                       metadata_max_age_ms=600_000)
        try:
            consumer.assign([kafka.TopicPartition(topic, 0)])
            assert read(consumer, 2) == ["a", "b"]
            cluster.start(3)  # the preferred replica: leadership comes back to it
            wait_until("broker 3 leads again", lambda: view.partition(topic, 0).leader == 3)
            produce(cluster.bootstrap, topic, ["c", "d"])
            assert read(consumer, 2) == ["c", "d"]
        finally:
            consumer.close()
    unknown = [r.getMessage() for r in caplog.records if "UnknownBrokerId" in r.getMessage()]
    assert not unknown, unknown
