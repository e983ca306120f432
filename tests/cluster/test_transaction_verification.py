"""Transaction verification (KIP-890 part 1) across brokers: while the transaction
coordinator is down, a partition leader cannot verify a transaction's first write and
answers NOT_ENOUGH_REPLICAS, which producers retry; the retry succeeds once the coordinator
is back, and the transaction commits."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.metadata import FindCoordinatorRequest

from brokercore.protocol.errors import ErrorCode
from tests.brokercore.wire import WireClient
from tests.brokercore.wire_txn import WireTransactions, produce_request
from tests.brokerproc import ClusterProcess
from tests.cluster.faults import wait_until
from tests.compat.clients import new_topic

# The coordinator's partition has one replica: with its broker down, no other takes over.
OVERRIDES = {
    "transaction.state.log.replication.factor": "1",
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcess]:
    with ClusterProcess(tmp_path / "cluster", brokers=3, overrides=OVERRIDES) as c:
        yield c


def _topic_on(client: WireClient, node_id: int) -> str:
    name = new_topic("verified")
    topic = CreateTopicsRequest.CreatableTopic
    created = client.request(CreateTopicsRequest(topics=[topic(
        name=name, num_partitions=-1, replication_factor=-1, configs=[],
        assignments=[topic.CreatableReplicaAssignment(partition_index=0,
                                                      broker_ids=[node_id])])],
        timeout_ms=10_000, validate_only=False), version=4)
    assert created.topics[0].error_code == ErrorCode.NONE
    return name


def test_a_write_the_coordinator_cannot_verify_yet_is_retriable_and_retried_succeeds(
    cluster: ClusterProcess,
) -> None:
    transactional_id = f"unverifiable-{uuid.uuid4().hex[:8]}"
    with WireClient(cluster.bootstrap_of(1)) as any_broker:
        def named() -> int | None:
            found = any_broker.request(
                FindCoordinatorRequest(key=transactional_id, key_type=1), 3)
            return int(found.node_id) if found.error_code == ErrorCode.NONE else None

        coordinator = wait_until("the transaction coordinator is named", named)
        leader = 1 if coordinator != 1 else 2
        topic = _topic_on(any_broker, leader)
    with WireClient(cluster.bootstrap_of(coordinator)) as to_coordinator:
        producer = WireTransactions(to_coordinator, transactional_id)
        producer.add(topic, 0)
    request = produce_request(transactional_id, topic, 0,
                              producer.batch(topic, 0, [b"verified at last"]))

    cluster.kill(coordinator)
    with WireClient(cluster.bootstrap_of(leader)) as to_leader:
        [answer] = to_leader.request(request, 10).responses
        refused = answer.partition_responses[0]
        assert refused.error_code == ErrorCode.NOT_ENOUGH_REPLICAS, refused

        cluster.start(coordinator)

        def retried() -> bool | None:
            [answer] = to_leader.request(request, 10).responses
            code = answer.partition_responses[0].error_code
            assert code in (ErrorCode.NONE, ErrorCode.NOT_ENOUGH_REPLICAS), code
            return code == ErrorCode.NONE or None

        wait_until("the retried write is verified and appended", retried)
    with WireClient(cluster.bootstrap_of(coordinator)) as to_coordinator:
        producer.client = to_coordinator
        producer.end(commit=True)
