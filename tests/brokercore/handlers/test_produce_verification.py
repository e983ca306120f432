"""Transaction verification on Produce (KIP-890 part 1) on the wire: a transactional write
the coordinator does not vouch for is refused with Kafka's code for the request's version,
and leaves nothing open that would hold read_committed readers; pipelined writes of a
transaction that starts on a partition still append in order."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import confluent_kafka
import pytest
from kafka.protocol.admin import DescribeConfigsRequest, IncrementalAlterConfigsRequest
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from brokercore.protocol.errors import ErrorCode
from tests.brokercore.wire import WireClient
from tests.brokercore.wire_txn import WireTransactions
from tests.brokerproc import BrokerProcess
from tests.compat.clients import new_topic

ListTopic = ListOffsetsRequest.ListOffsetsTopic
TopicData = ProduceRequest.TopicProduceData


def _id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _offsets(client: WireClient, topic: str, partition: int = 0) -> tuple[int, int]:
    """(high watermark, last stable offset) of the partition."""
    def latest(isolation_level: int) -> int:
        response = client.request(ListOffsetsRequest(
            replica_id=-1, isolation_level=isolation_level, topics=[ListTopic(
                name=topic, partitions=[ListTopic.ListOffsetsPartition(
                    partition_index=partition, current_leader_epoch=-1,
                    timestamp=-1)])]), 4)
        return int(response.topics[0].partitions[0].offset)

    return latest(0), latest(1)


def _read_committed(bootstrap: str, topic: str, until: int) -> list[bytes]:
    """The values a read_committed consumer gets from partition 0, reading until it has
    `until` of them or nothing comes for 5 s."""
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": _id("verified"),
        "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    try:
        while len(values) < until and (msg := consumer.poll(5)) is not None:
            if msg.error() is None:
                values.append(msg.value())
    finally:
        consumer.close()
    return values


@pytest.mark.parametrize(("version", "refused_with"), [
    (10, ErrorCode.INVALID_TXN_STATE),  # librdkafka's version; kafka-python's 9, aiokafka's 7
    (11, ErrorCode.TRANSACTION_ABORTABLE),  # the producer understands KIP-890's new error
])
def test_a_late_write_after_its_transaction_committed_is_refused_and_holds_no_reader(
    client: WireClient, kafka_bootstrap: str, version: int, refused_with: ErrorCode,
) -> None:
    topic = client.create_topic(new_topic("late-write"), 1)
    zombie = WireTransactions(client, _id("zombie"))
    zombie.add(topic, 0)
    assert zombie.produce(topic, 0, [b"committed"], version).error_code == ErrorCode.NONE
    zombie.end(commit=True)

    # The same producer's next batch, delayed past its own transaction's commit marker.
    late = zombie.produce(topic, 0, [b"late"], version)

    other = WireTransactions(client, _id("after"))
    other.add(topic, 0)
    assert other.produce(topic, 0, [b"later"], version).error_code == ErrorCode.NONE
    other.end(commit=True)
    high_watermark, last_stable_offset = _offsets(client, topic)
    assert (late.error_code, last_stable_offset) == (refused_with, high_watermark)
    assert _read_committed(kafka_bootstrap, topic, until=2) == [b"committed", b"later"]


def test_a_write_to_a_partition_not_added_to_the_transaction_is_refused(
    client: WireClient,
) -> None:
    topic = client.create_topic(new_topic("not-added"), 2)
    producer = WireTransactions(client, _id("not-added"))
    producer.add(topic, 0)
    assert producer.produce(topic, 1, [b"never added"]).error_code == (
        ErrorCode.INVALID_TXN_STATE)
    assert producer.produce(topic, 0, [b"added"]).error_code == ErrorCode.NONE
    producer.end(commit=True)
    assert _offsets(client, topic) == (2, 2)  # the record and its commit marker


def test_a_fenced_producers_write_where_no_marker_went_is_an_invalid_epoch(
    client: WireClient,
) -> None:
    topic = client.create_topic(new_topic("fenced"), 2)
    transactional_id = _id("fenced")
    old = WireTransactions(client, transactional_id)
    old.add(topic, 0)
    WireTransactions(client, transactional_id)  # a new instance: the epoch moves on
    # Partition 1 was never in the aborted transaction: no marker told it of the new epoch.
    assert old.produce(topic, 1, [b"from the old epoch"]).error_code == (
        ErrorCode.INVALID_PRODUCER_EPOCH)
    assert _offsets(client, topic, 1) == (0, 0)


def test_pipelined_writes_append_in_order_while_one_waits_for_the_coordinator(
    client: WireClient,
) -> None:
    topic = client.create_topic(new_topic("pipelined"), 2)
    producer = WireTransactions(client, _id("pipelined"))
    producer.add(topic, 0, 1)
    assert producer.produce(topic, 1, [b"opens the transaction on 1"]).error_code == 0
    # Five in flight, as librdkafka keeps them. The first also starts the transaction on
    # partition 0, so it waits for the coordinator; the others write only to partition 1,
    # where the transaction is open, and must not overtake its batch there.
    requests = [[(0, [b"p0"]), (1, [b"p1-1"])]] + [[(1, [b"p1-%d" % n])] for n in range(2, 6)]
    frames = []
    for partitions in requests:
        request = ProduceRequest(
            transactional_id=producer.transactional_id, acks=-1, timeout_ms=10_000,
            topic_data=[TopicData(name=topic, partition_data=[
                TopicData.PartitionProduceData(index=index,
                                               records=producer.batch(topic, index, values))
                for index, values in partitions])])
        client.correlation_id += 1
        request.with_header(correlation_id=client.correlation_id, client_id="pipelined")
        frames.append(bytes(request.encode(version=10, header=True, framed=True)))
    client.send_raw(b"".join(frames))  # together, so the broker reads them all at once
    answers = [ProduceResponse.decode(client.read_frame(), version=10, header=True)
               for _ in requests]
    on_1 = [p for a in answers for p in a.responses[0].partition_responses if p.index == 1]
    assert [(p.error_code, p.base_offset) for p in on_1] == [
        (ErrorCode.NONE, n) for n in range(1, 6)]


def _set_verification(client: WireClient, enabled: bool) -> None:
    resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    response = client.request(IncrementalAlterConfigsRequest(
        resources=[resource(resource_type=4, resource_name="", configs=[
            resource.AlterableConfig(name="transaction.partition.verification.enable",
                                     config_operation=0, value=str(enabled).lower())])],
        validate_only=False), 1)
    assert response.responses[0].error_code == ErrorCode.NONE


def _verification(client: WireClient, node_id: int) -> str:
    resource = DescribeConfigsRequest.DescribeConfigsResource
    [result] = client.request(DescribeConfigsRequest(
        resources=[resource(resource_type=4, resource_name=str(node_id),
                            configuration_keys=["transaction.partition.verification.enable"])],
        include_synonyms=False, include_documentation=False), 4).results
    return str(result.configs[0].value)


def _eventually(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_verification_follows_its_dynamic_config(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory({"transaction.partition.verification.enable": "false"})
    with WireClient(broker.bootstrap) as client:
        topic = client.create_topic(new_topic("unverified"), 1)
        producer = WireTransactions(client, _id("unverified"))
        producer.add(topic, 0)
        assert producer.produce(topic, 0, [b"a"]).error_code == ErrorCode.NONE
        producer.end(commit=True)
        # Off, as before KIP-890: the late write opens a transaction nobody will end.
        assert producer.produce(topic, 0, [b"late"]).error_code == ErrorCode.NONE
        high_watermark, last_stable_offset = _offsets(client, topic)
        assert last_stable_offset < high_watermark

        _set_verification(client, True)
        _eventually(lambda: _verification(client, broker.node_id) == "true",
                    "the broker applies the dynamic config")
        fresh = WireTransactions(client, _id("verified"))
        assert fresh.produce(topic, 0, [b"not added"]).error_code == (
            ErrorCode.INVALID_TXN_STATE)
