"""A restarted broker replays a long `__transaction_state` partition: until it has, the
transaction APIs answer COORDINATOR_LOAD_IN_PROGRESS, confluent-kafka's transactional
producers retry, and they get the epochs the replayed state gives them: one more for an id
whose transaction had completed, two more for one whose transaction was left open (aborted
at a bumped epoch first), and the instances from before the restart are fenced."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin import DescribeTransactionsRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import InitProducerIdRequest

from brokercore.protocol.errors import ErrorCode
from tests.brokercore.wire import WireClient
from tests.brokerproc import BrokerProcess
from tests.compat.clients import new_topic, no_open_transaction

FILLERS = 30_000  # transactional ids in the one partition of __transaction_state
PIPELINE = 500  # InitProducerId requests in flight on the filling connection
APPS = 4  # real producers: even ones complete their transaction, odd ones leave it open
RETRIABLE = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
             ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}


def _fill(bootstrap: str, prefix: str) -> None:
    """FILLERS transactional ids, each with its InitProducerId record, pipelined."""
    with WireClient(bootstrap, timeout=60) as wire:
        assert wire.request(FindCoordinatorRequest(key=prefix, key_type=1), 3).error_code == 0
        for start in range(0, FILLERS, PIPELINE):
            batch = range(start, min(start + PIPELINE, FILLERS))
            for n in batch:
                wire.correlation_id += 1
                request = InitProducerIdRequest(
                    transactional_id=f"{prefix}-{n}", transaction_timeout_ms=60_000,
                    producer_id=-1, producer_epoch=-1)
                request.with_header(correlation_id=wire.correlation_id, client_id="filler")
                wire.send_raw(bytes(request.encode(version=4, header=True, framed=True)))
            for _ in batch:
                answer = request.header.get_response_class().decode(
                    wire.read_frame(), version=4, header=True)
                assert answer.error_code == 0, answer


def _describe(wire: WireClient, transactional_id: str) -> Any:
    [state] = wire.request(DescribeTransactionsRequest(transactional_ids=[transactional_id]),
                           0).transaction_states
    return state


def _producer(bootstrap: str, transactional_id: str) -> confluent_kafka.Producer:
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "transactional.id": transactional_id,
        "transaction.timeout.ms": 60_000})
    producer.init_transactions(60)
    return producer


def _probe_until_loaded(bootstrap: str, transactional_id: str) -> list[int]:
    """DescribeTransactions over and over from the first moment; each answer's error code."""
    codes: list[int] = []
    with WireClient.as_soon_as_listening(bootstrap) as client:
        while not codes or codes[-1] != 0:
            codes.append(_describe(client, transactional_id).error_code)
    return codes


def _read_committed(bootstrap: str, topic: str) -> list[bytes]:
    """The one partition's committed values, once every transaction's markers are written
    (the broker writes them after answering EndTxn), read to its last stable offset."""
    deadline = time.monotonic() + 30
    while not no_open_transaction(bootstrap, topic, 1):
        assert time.monotonic() < deadline, f"a transaction on {topic} is still open"
        time.sleep(0.1)
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex[:8]}",
        "isolation.level": "read_committed", "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "enable.partition.eof": True})
    values: list[bytes] = []
    try:
        consumer.subscribe([topic])
        while True:
            assert time.monotonic() < deadline + 30, f"{topic} read to no end"
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is None:
                values.append(message.value())
            elif message.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                return values
    finally:
        consumer.close()


def test_producers_retry_while_a_long_transaction_state_partition_loads(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory({"transaction.state.log.num.partitions": "1"})
    topic = new_topic("txn-load")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # alive until answered
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    prefix = f"filler-{uuid.uuid4().hex[:6]}"
    _fill(broker.bootstrap, prefix)
    apps = [f"app-{uuid.uuid4().hex[:6]}-{n}" for n in range(APPS)]
    old = {app: _producer(broker.bootstrap, app) for app in apps}
    for n, (app, producer) in enumerate(old.items()):
        producer.begin_transaction()
        producer.produce(topic, f"{app} before".encode())
        producer.flush(30)
        if n % 2 == 0:
            producer.commit_transaction(30)
    with WireClient(broker.bootstrap) as wire:
        before = {app: _describe(wire, app) for app in apps}
    assert [before[app].transaction_state for app in apps] == [
        "CompleteCommit", "Ongoing"] * (APPS // 2)

    broker.kill()
    with ThreadPoolExecutor(1 + APPS) as pool:
        probe = pool.submit(_probe_until_loaded, broker.bootstrap, f"{prefix}-0")
        broker.start()
        new = [pool.submit(_producer, broker.bootstrap, app) for app in apps]
        codes = probe.result(timeout=120)
        producers = dict(zip(apps, (f.result(timeout=120) for f in new), strict=True))
    # Retriable errors only, the load among them: it was seen from outside.
    assert set(codes[:-1]) <= RETRIABLE and ErrorCode.COORDINATOR_LOAD_IN_PROGRESS in codes, codes

    for app, producer in producers.items():
        producer.begin_transaction()
        producer.produce(topic, f"{app} after".encode())
        producer.commit_transaction(30)
    with WireClient(broker.bootstrap) as wire:
        after = {app: _describe(wire, app) for app in apps}
        assert _describe(wire, f"{prefix}-{FILLERS - 1}").producer_epoch == 0  # all replayed
    for n, app in enumerate(apps):
        assert after[app].producer_id == before[app].producer_id, app
        assert after[app].producer_epoch == before[app].producer_epoch + 1 + n % 2, app
        assert after[app].transaction_state == "CompleteCommit", app
    stale = old[apps[0]]  # the instance from before the restart
    stale.begin_transaction()
    stale.produce(topic, b"from a fenced instance")
    try:
        stale.commit_transaction(30)
    except confluent_kafka.KafkaException as exc:
        assert exc.args[0].fatal() or exc.args[0].txn_requires_abort(), exc
    else:
        raise AssertionError("a fenced producer committed")
    assert sorted(_read_committed(broker.bootstrap, topic)) == sorted(
        [f"{app} before".encode() for app in apps[::2]]
        + [f"{app} after".encode() for app in apps])
