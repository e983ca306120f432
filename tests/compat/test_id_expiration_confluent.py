"""Expiration of transactional ids (`transactional.id.expiration.ms`) and of producer ids
(`producer.id.expiration.ms`, KIP-854) as confluent-kafka (librdkafka) meets them, against
a broker started with short expirations; what the broker still lists is read over the wire
(ListTransactions, DescribeTransactions, DescribeProducers)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, ConfigResource
from kafka.protocol.admin import (
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    ListTransactionsRequest,
)

from brokercore.protocol.errors import ErrorCode
from tests.brokercore.wire import WireClient
from tests.brokerproc import BrokerProcess
from tests.compat.groups import create_topic, wait_until
from tests.compat.test_transactions_confluent import TIMEOUT, _producer, _read_all, _send, _values


@pytest.fixture
def client(broker: BrokerProcess) -> Any:
    with WireClient(broker.bootstrap) as wire:
        yield wire


def _listed(client: WireClient) -> dict[str, int]:
    """Transactional id -> producer id, of every id the broker's coordinator lists."""
    answer = client.request(ListTransactionsRequest(
        state_filters=[], producer_id_filters=[], duration_filter=-1,
        transactional_id_pattern=None), 2)
    assert answer.error_code == ErrorCode.NONE
    return {t.transactional_id: t.producer_id for t in answer.transaction_states}


def _producers(client: WireClient, topic: str) -> dict[int, int]:
    """Producer id -> last sequence, of the producers partition 0 of `topic` remembers."""
    wanted = DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[0])
    [described] = client.request(DescribeProducersRequest(topics=[wanted]), 0).topics
    [partition] = described.partitions
    assert partition.error_code == ErrorCode.NONE
    return {p.producer_id: p.last_sequence for p in partition.active_producers}


class TestTransactionalIds:
    @pytest.fixture
    def broker(self, broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
        return broker_factory({
            "transactional.id.expiration.ms": "1500",
            "transaction.remove.expired.transaction.cleanup.interval.ms": "200",
        })

    def test_an_idle_id_expires_and_its_producer_and_a_new_one_carry_on(
        self, broker: BrokerProcess, client: WireClient,
    ) -> None:
        topic = create_topic(broker.bootstrap, "txn-expiry")
        transactional_id = f"expiry-{uuid.uuid4().hex[:8]}"
        producer = _producer(broker.bootstrap, transactional_id)
        producer.begin_transaction()
        _send(producer, topic, _values("first", 2))
        producer.commit_transaction(TIMEOUT)
        first_pid = _listed(client)[transactional_id]

        wait_until(lambda: transactional_id not in _listed(client), "the idle id to expire")
        [state] = client.request(DescribeTransactionsRequest(
            transactional_ids=[transactional_id]), 0).transaction_states
        assert state.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND

        # The same instance: its next transaction finds its producer id unknown, which
        # librdkafka makes abortable; the abort asks for a new epoch (KIP-360) and gets a
        # fresh producer id, and the transaction after it commits.
        producer.begin_transaction()
        producer.produce(topic, value=b"lost", partition=0)
        with pytest.raises(confluent_kafka.KafkaException) as failed:
            producer.commit_transaction(TIMEOUT)
        assert failed.value.args[0].txn_requires_abort()
        producer.abort_transaction(TIMEOUT)
        producer.begin_transaction()
        _send(producer, topic, _values("second", 2))
        producer.commit_transaction(TIMEOUT)
        second_pid = _listed(client)[transactional_id]
        assert second_pid != first_pid

        # Idle again past the expiration: a new instance with the id starts afresh.
        wait_until(lambda: transactional_id not in _listed(client), "the id to expire again")
        newcomer = _producer(broker.bootstrap, transactional_id)
        newcomer.begin_transaction()
        _send(newcomer, topic, _values("third", 2))
        newcomer.commit_transaction(TIMEOUT)
        assert _listed(client)[transactional_id] not in (first_pid, second_pid)
        committed = [*_values("first", 2), *_values("second", 2), *_values("third", 2)]
        wait_until(lambda: _read_all(broker.bootstrap, topic, "read_committed") == committed,
                   "the three committed transactions to be read")


class TestProducerIds:
    @pytest.fixture
    def broker(self, broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
        return broker_factory({
            "producer.id.expiration.ms": "1500",
            "producer.id.expiration.check.interval.ms": "200",
        })

    def test_an_idle_idempotent_producer_is_forgotten_and_writes_again_as_a_new_one(
        self, broker: BrokerProcess, client: WireClient,
    ) -> None:
        topic = create_topic(broker.bootstrap, "pid-expiry")
        producer = confluent_kafka.Producer({
            "bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
        for value in _values("early", 3):
            producer.produce(topic, value=value, partition=0)
        assert producer.flush(TIMEOUT) == 0
        [(pid, last_sequence)] = _producers(client, topic).items()
        assert last_sequence == 2

        wait_until(lambda: _producers(client, topic) == {}, "the idle producer to expire")
        # librdkafka goes on at sequence 3; the partition takes it from an unknown producer.
        for value in _values("late", 2):
            producer.produce(topic, value=value, partition=0)
        assert producer.flush(TIMEOUT) == 0
        assert _producers(client, topic) == {pid: 4}
        written = [*_values("early", 3), *_values("late", 2)]  # each once, in order
        wait_until(lambda: _read_all(broker.bootstrap, topic, "read_uncommitted") == written,
                   "the records to be read")

    def test_the_internal_check_interval_is_described_because_it_is_set(
        self, broker: BrokerProcess,
    ) -> None:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        [future] = admin.describe_configs([ConfigResource("BROKER", "1")]).values()
        configs = future.result(TIMEOUT)
        assert configs["producer.id.expiration.check.interval.ms"].value == "200"
        assert configs["producer.id.expiration.check.interval.ms"].is_read_only
        assert not configs["producer.id.expiration.ms"].is_read_only
