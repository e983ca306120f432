"""kafka-python meets the authorizer's refusals as the exceptions it raises against Kafka
(aiokafka's and kafka-python's own SASL suites expect these): TopicAuthorizationFailedError,
GroupAuthorizationFailedError, TransactionalIdAuthorizationFailedError; and works once the
ACL is granted. The broker and its admin path are test_api_authorization's."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import (
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)

from tests.brokercore.security.test_api_authorization import (  # noqa: F401  (fixtures)
    CLUSTER,
    GROUP,
    TOPIC,
    TXN,
    acl,
    admin,
    broker,
    grant,
    make_topic,
    new_name,
)
from tests.brokercore.wire import WireClient
from tests.brokerproc import BrokerProcess


def test_producer(broker: BrokerProcess, admin: WireClient,  # noqa: F811
                  grant: Callable[..., None]) -> None:  # noqa: F811
    topic = make_topic(broker, admin)
    refused = KafkaProducer(bootstrap_servers=broker.bootstrap, max_block_ms=10000,
                            enable_idempotence=False)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            refused.send(topic, b"refused").get(10)
    finally:
        refused.close()
    grant(acl(TOPIC, topic, "WRITE"))  # idempotent (kafka-python's default): KIP-679
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, max_block_ms=10000)
    try:
        assert producer.send(topic, b"allowed").get(10).offset == 0
    finally:
        producer.close()


def test_consumer_group(broker: BrokerProcess, admin: WireClient,  # noqa: F811
                        grant: Callable[..., None]) -> None:  # noqa: F811
    topic, group = make_topic(broker, admin), new_name("g")
    grant(acl(TOPIC, topic, "ALL"))
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    try:
        producer.send(topic, b"v").get(10)
    finally:
        producer.close()

    def consume() -> list[bytes]:
        consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group,
                                 auto_offset_reset="earliest")
        try:
            for _ in range(20):
                records = consumer.poll(500)
                if records:
                    return [r.value for batch in records.values() for r in batch]
            return []
        finally:
            consumer.close()

    with pytest.raises(GroupAuthorizationFailedError):
        consume()
    grant(acl(GROUP, group, "READ"))
    assert consume() == [b"v"]


def test_transactional_producer(broker: BrokerProcess, admin: WireClient,  # noqa: F811
                                grant: Callable[..., None]) -> None:  # noqa: F811
    topic, txn_id = make_topic(broker, admin), new_name("txn")
    # the broker's own marker requests are ANONYMOUS from 127.0.0.1 too (PLAINTEXT)
    grant(acl(TOPIC, topic, "WRITE"), acl(CLUSTER, "kafka-cluster", "CLUSTER_ACTION"))
    refused = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=txn_id,
                            max_block_ms=10000)
    try:
        with pytest.raises(TransactionalIdAuthorizationFailedError):
            refused.init_transactions()
    finally:
        refused.close()
    grant(acl(TXN, txn_id, "WRITE"))
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=txn_id,
                             max_block_ms=10000)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"in a transaction")
        producer.commit_transaction()
    finally:
        producer.close()
