"""What the group and transaction coordinators answer when a write to their topic fails:
Kafka's mapping of the partition's or the log's error (NOT_LEADER_OR_FOLLOWER and
KAFKA_STORAGE_ERROR mean the coordinator moved: NOT_COORDINATOR; UNKNOWN_TOPIC_OR_PARTITION,
NOT_ENOUGH_REPLICAS and REQUEST_TIMED_OUT mean it is not available for now).

Both topics on one broker's real logs (`replication.harness`, the test playing the
controller); the failures are real: a partition led elsewhere, an ISR below
min.insync.replicas, a follower that never fetches, a log file that can no longer be written.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from brokercore.coordinator.offsets_topic import BrokerOffsetsTopic
from brokercore.coordinator.records import KeyValue
from brokercore.coordinator.state import GroupError
from brokercore.protocol.errors import ErrorCode
from brokercore.txn.state_topic import TransactionStateTopic
from tests.brokercore.replication.harness import Cluster, _ImageOnly

RECORDS: list[KeyValue] = [(b"key", b"value")]


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    cluster = Cluster(tmp_path, 2)
    await cluster.start()
    yield cluster
    await cluster.stop()


@pytest.fixture(params=[BrokerOffsetsTopic, TransactionStateTopic])
async def store(request: pytest.FixtureRequest, cluster: Cluster) -> BrokerOffsetsTopic:
    node = cluster.nodes[1]
    store: BrokerOffsetsTopic = request.param(node.replica_manager, _ImageOnly(node.image),
                                              node.config)
    await cluster.create_topic(store.topic, [1, 2], 2)
    cluster.change_leader(store.topic, 1, isr=[1], index=0)  # broker 2 left its ISR
    cluster.change_leader(store.topic, 2, index=1)
    return store


def code_of(error: pytest.ExceptionInfo[GroupError]) -> ErrorCode:
    return error.value.error_code


async def test_a_partition_led_elsewhere_answers_not_coordinator(
        store: BrokerOffsetsTopic) -> None:
    with pytest.raises(GroupError) as error:
        store.append(1, RECORDS, 0)
    assert code_of(error) == ErrorCode.NOT_COORDINATOR


async def test_a_partition_the_topic_lacks_answers_coordinator_not_available(
        store: BrokerOffsetsTopic) -> None:
    with pytest.raises(GroupError) as error:
        store.append(7, RECORDS, 0)
    assert code_of(error) == ErrorCode.COORDINATOR_NOT_AVAILABLE


async def test_an_isr_below_min_insync_replicas_answers_coordinator_not_available(
        cluster: Cluster, store: BrokerOffsetsTopic) -> None:
    cluster.apply({"type": "config", "resource": "topic", "name": store.topic,
                   "key": "min.insync.replicas", "value": "2"})
    with pytest.raises(GroupError) as error:
        store.append(0, RECORDS, 0)
    assert code_of(error) == ErrorCode.COORDINATOR_NOT_AVAILABLE


async def test_a_write_the_isr_does_not_take_in_time_answers_coordinator_not_available(
        cluster: Cluster, store: BrokerOffsetsTopic) -> None:
    await cluster.stop_node(2)
    cluster.change_leader(store.topic, 1, isr=[1, 2], index=0)  # 2 counts, and is gone
    offset = store.append(0, RECORDS, 0)
    with pytest.raises(GroupError) as error:
        await store.wait_replicated(0, offset, timeout_ms=200)
    assert code_of(error) == ErrorCode.COORDINATOR_NOT_AVAILABLE


async def test_an_io_error_in_the_write_answers_not_coordinator(
        cluster: Cluster, store: BrokerOffsetsTopic) -> None:
    segment = cluster.nodes[1].partition(store.topic, 0).log.active_segment
    read_only = os.open(segment.log_path, os.O_RDONLY)
    os.dup2(read_only, segment._fd)  # its next write fails (EBADF), as on a failed disk
    os.close(read_only)
    with pytest.raises(GroupError) as error:
        store.append(0, RECORDS, 0)
    assert code_of(error) == ErrorCode.NOT_COORDINATOR  # Kafka: KAFKA_STORAGE_ERROR
