"""The last APIs raised to the versions a Kafka 4.0 broker serves (FindCoordinator v6,
DescribeGroups v6, InitProducerId v5), on a raw socket at exactly those versions."""

from __future__ import annotations

import time
import uuid

from kafka.protocol.admin import DescribeGroupsRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import InitProducerIdRequest

from brokercore.protocol.errors import ErrorCode
from tests.brokercore.wire import WireClient
from tests.compat.test_group_versions_wire import find_coordinator, join


def test_find_coordinator_v5_and_v6_find_groups_and_transactions_but_no_share_groups(
    kafka_bootstrap: str,
) -> None:
    group, txn = f"g-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    with WireClient(kafka_bootstrap) as wire:
        find_coordinator(wire, group)
        find_coordinator_txn(wire, txn)
        for version in (5, 6):
            groups = wire.request(FindCoordinatorRequest(key_type=0, coordinator_keys=[group]),
                                  version).coordinators
            txns = wire.request(FindCoordinatorRequest(key_type=1, coordinator_keys=[txn]),
                                version).coordinators
            assert [(c.key, c.error_code) for c in groups] == [(group, ErrorCode.NONE)]
            assert [(c.key, c.error_code) for c in txns] == [(txn, ErrorCode.NONE)]
            assert groups[0].node_id >= 0 and txns[0].node_id >= 0
        [share] = wire.request(FindCoordinatorRequest(
            key_type=2, coordinator_keys=[f"{group}:topic-id:0"]), 6).coordinators
    assert share.error_code == ErrorCode.INVALID_REQUEST and share.node_id == -1


def test_describe_groups_v6_names_missing_groups_with_a_message(kafka_bootstrap: str) -> None:
    group, missing = f"classic-{uuid.uuid4().hex[:8]}", f"none-{uuid.uuid4().hex[:8]}"
    with WireClient(kafka_bootstrap) as wire:
        find_coordinator(wire, group)
        assert join(wire, group, "instance-1").error_code == ErrorCode.NONE
        v6 = wire.request(DescribeGroupsRequest(groups=[group, missing],
                                                include_authorized_operations=False), 6)
        v5 = wire.request(DescribeGroupsRequest(groups=[missing],
                                                include_authorized_operations=False), 5)
    found, absent = v6.groups
    assert (found.error_code, found.error_message) == (ErrorCode.NONE, None)
    assert found.group_id == group and found.protocol_type == "consumer"
    assert absent.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert absent.error_message == f"Group {missing} not found."
    assert (v5.groups[0].error_code, v5.groups[0].group_state) == (ErrorCode.NONE, "Dead")


def test_init_producer_id_v5_fences_by_epoch_as_v4_does(kafka_bootstrap: str) -> None:
    transactional_id = f"v5-{uuid.uuid4().hex[:8]}"
    with WireClient(kafka_bootstrap) as wire:
        find_coordinator_txn(wire, transactional_id)

        def init(producer_id: int = -1, epoch: int = -1, tid: str | None = transactional_id
                 ) -> tuple[int, int, int]:
            answer = wire.request(InitProducerIdRequest(
                transactional_id=tid, transaction_timeout_ms=60_000, producer_id=producer_id,
                producer_epoch=epoch), 5)
            return answer.error_code, answer.producer_id, answer.producer_epoch

        code, producer_id, epoch = init()
        again = init()
        stale = init(producer_id, epoch)
        idempotent = init(tid=None)
    assert code == ErrorCode.NONE and producer_id >= 0
    assert again == (ErrorCode.NONE, producer_id, epoch + 1)
    assert stale[0] == ErrorCode.PRODUCER_FENCED
    assert idempotent[0] == ErrorCode.NONE and idempotent[1] not in (-1, producer_id)


def find_coordinator_txn(wire: WireClient, transactional_id: str) -> None:
    """Ask until the transaction coordinator is there (its topic is made on demand)."""
    deadline = time.monotonic() + 15
    while wire.request(FindCoordinatorRequest(key=transactional_id, key_type=1),
                       3).error_code != ErrorCode.NONE:
        assert time.monotonic() < deadline, "no transaction coordinator"
        time.sleep(0.1)
