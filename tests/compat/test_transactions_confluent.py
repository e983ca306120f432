"""Exactly-once transactions through confluent-kafka (librdkafka) against the built-in broker:
consume-transform-produce, abort then retry, zombie fencing, and what read_committed and
read_uncommitted consumers see."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable

import confluent_kafka
import pytest
from confluent_kafka import TopicPartition

from tests.brokerproc import BrokerProcess
from tests.compat.clients import no_open_transaction
from tests.compat.groups import PARTITIONS, create_topic, produce, wait_until

TIMEOUT = 30.0


def _producer(bootstrap: str, transactional_id: str, **config: object) -> confluent_kafka.Producer:
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "transactional.id": transactional_id,
        "linger.ms": 5, **config,
    })
    producer.init_transactions(TIMEOUT)
    return producer


def _consumer(bootstrap: str, isolation: str, group: str | None = None,
              **config: object) -> confluent_kafka.Consumer:
    return confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": group or f"g-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "isolation.level": isolation, **config,
    })


def _read_all(bootstrap: str, topic: str, isolation: str, open_ok: bool = False) -> list[bytes]:
    """Every value a consumer of this isolation level reads from the start of each partition
    to its end as the broker answers it to that level (the high watermark, or the last stable
    offset for read_committed): librdkafka reports the end of a partition once its fetch
    position reaches that offset, so no quiet period has to pass. The partitions are
    assigned, not subscribed: no group join to wait for.

    The broker answers EndTxn once the decision is logged and writes the markers after, so
    until then a read_committed end stops short of the transaction: first this waits until
    no transaction on the topic holds its end back, unless the test left one open
    (`open_ok`). What a broker wrongly served is in the fetches before the end, and the end
    is where the markers put it."""
    if not open_ok:
        wait_until(lambda: no_open_transaction(bootstrap, topic, PARTITIONS),
                   f"{topic}'s markers written")
    end_reports: dict[str, object] = {"enable.partition.eof": True, "fetch.wait.max.ms": 10}
    consumer = _consumer(bootstrap, isolation, None, **end_reports)
    partitions = consumer.list_topics(topic, TIMEOUT).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                     for p in partitions])
    values: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + TIMEOUT
    try:
        while len(at_end) < len(partitions):
            assert time.monotonic() < deadline, f"{topic} not read to its end ({isolation})"
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error() is None:
                values.append(msg.value())
            elif msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                at_end.add(msg.partition())
    finally:
        consumer.close()
    return values


def _send(producer: confluent_kafka.Producer, topic: str, values: list[bytes],
          partition: int = 0) -> None:
    for value in values:
        producer.produce(topic, value=value, partition=partition)
    producer.flush(TIMEOUT)  # on the broker, so an abort has records to abort


def _values(tag: str, count: int) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(count)]


def test_consume_transform_produce_commits_output_and_offsets_together(
    kafka_bootstrap: str,
) -> None:
    source = create_topic(kafka_bootstrap, "ctp-in")
    sink = create_topic(kafka_bootstrap, "ctp-out")
    expected = produce(kafka_bootstrap, source, 5, "in")
    group = f"ctp-{uuid.uuid4().hex[:8]}"
    consumer = _consumer(kafka_bootstrap, "read_committed", group)
    consumer.subscribe([source])
    producer = _producer(kafka_bootstrap, f"ctp-{uuid.uuid4().hex[:8]}")
    seen: set[bytes] = set()
    deadline = time.monotonic() + TIMEOUT
    while len(seen) < len(expected) and time.monotonic() < deadline:
        batch = [m for m in consumer.consume(10, 0.5) if m.error() is None]
        if not batch:
            continue
        producer.begin_transaction()
        for msg in batch:
            producer.produce(sink, value=msg.value().upper(), partition=msg.partition())
            seen.add(msg.value())
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(),
            TIMEOUT)
        producer.commit_transaction(TIMEOUT)
    consumer.close()
    assert seen == expected
    assert sorted(_read_all(kafka_bootstrap, sink, "read_committed")) == sorted(
        v.upper() for v in expected)
    # The offsets committed with the transactions: a new member of the group starts at the end.
    check = _consumer(kafka_bootstrap, "read_committed", group)
    committed = check.committed([TopicPartition(source, p) for p in range(6)], TIMEOUT)
    check.close()
    assert sum(tp.offset for tp in committed) == len(expected)


def test_an_aborted_transaction_leaves_no_output_and_no_offsets_and_a_retry_commits_once(
    kafka_bootstrap: str,
) -> None:
    source = create_topic(kafka_bootstrap, "abort-in")
    sink = create_topic(kafka_bootstrap, "abort-out")
    produce(kafka_bootstrap, source, 2, "in")
    group = f"abort-{uuid.uuid4().hex[:8]}"
    producer = _producer(kafka_bootstrap, f"abort-{uuid.uuid4().hex[:8]}")
    consumer = _consumer(kafka_bootstrap, "read_committed", group)
    offsets = [TopicPartition(source, p, 2) for p in range(6)]

    producer.begin_transaction()
    _send(producer, sink, _values("attempt", 4))
    producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), TIMEOUT)
    producer.abort_transaction(TIMEOUT)
    assert _read_all(kafka_bootstrap, sink, "read_committed") == []
    before = consumer.committed([TopicPartition(source, p) for p in range(6)], TIMEOUT)
    assert all(tp.offset < 0 for tp in before)  # nothing committed

    producer.begin_transaction()
    _send(producer, sink, _values("attempt", 4))
    producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), TIMEOUT)
    producer.commit_transaction(TIMEOUT)
    assert _read_all(kafka_bootstrap, sink, "read_committed") == _values("attempt", 4)
    assert _read_all(kafka_bootstrap, sink, "read_uncommitted") == _values("attempt", 4) * 2
    after = consumer.committed([TopicPartition(source, p) for p in range(6)], TIMEOUT)
    consumer.close()
    assert [tp.offset for tp in after] == [2] * 6


def test_a_new_producer_with_the_same_transactional_id_fences_the_zombie(
    kafka_bootstrap: str,
) -> None:
    topic = create_topic(kafka_bootstrap, "zombie")
    transactional_id = f"zombie-{uuid.uuid4().hex[:8]}"
    zombie = _producer(kafka_bootstrap, transactional_id)
    zombie.begin_transaction()
    _send(zombie, topic, _values("zombie", 3))

    successor = _producer(kafka_bootstrap, transactional_id)  # aborts the zombie's transaction
    successor.begin_transaction()
    _send(successor, topic, _values("successor", 3))
    successor.commit_transaction(TIMEOUT)

    with pytest.raises(confluent_kafka.KafkaException) as raised:
        zombie.produce(topic, value=b"late", partition=0)
        zombie.commit_transaction(TIMEOUT)
    assert raised.value.args[0].fatal()
    assert _read_all(kafka_bootstrap, topic, "read_committed") == _values("successor", 3)


def test_read_committed_never_returns_open_or_aborted_records(kafka_bootstrap: str) -> None:
    topic = create_topic(kafka_bootstrap, "isolation")
    tp = TopicPartition(topic, 0)
    producer = _producer(kafka_bootstrap, f"iso-{uuid.uuid4().hex[:8]}")
    producer.begin_transaction()
    _send(producer, topic, _values("committed", 3))
    producer.commit_transaction(TIMEOUT)
    producer.begin_transaction()
    _send(producer, topic, _values("open", 3))

    committed_reader = _consumer(kafka_bootstrap, "read_committed")
    uncommitted_reader = _consumer(kafka_bootstrap, "read_uncommitted")
    # ListOffsets answers the last stable offset to read_committed: the open one's start.
    committed_end = committed_reader.get_watermark_offsets(tp, TIMEOUT, cached=False)[1]
    uncommitted_end = uncommitted_reader.get_watermark_offsets(tp, TIMEOUT, cached=False)[1]
    committed_reader.close()
    uncommitted_reader.close()
    assert (committed_end, uncommitted_end) == (4, 7)  # 3 records and a marker; then 3 open
    assert _read_all(kafka_bootstrap, topic, "read_committed", open_ok=True) == _values(
        "committed", 3)
    assert _read_all(kafka_bootstrap, topic, "read_uncommitted", open_ok=True) == (
        _values("committed", 3) + _values("open", 3))

    producer.abort_transaction(TIMEOUT)
    producer.begin_transaction()
    _send(producer, topic, _values("after", 2))
    producer.commit_transaction(TIMEOUT)
    assert _read_all(kafka_bootstrap, topic, "read_committed") == (
        _values("committed", 3) + _values("after", 2))
    assert _read_all(kafka_bootstrap, topic, "read_uncommitted") == (
        _values("committed", 3) + _values("open", 3) + _values("after", 2))


def test_the_coordinator_aborts_a_transaction_past_its_timeout(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory({
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
        "transaction.max.timeout.ms": "60000",
    })
    topic = create_topic(broker.bootstrap, "expiry")
    forgetful = _producer(broker.bootstrap, f"expiry-{uuid.uuid4().hex[:8]}",
                          **{"transaction.timeout.ms": 1500})
    forgetful.begin_transaction()
    _send(forgetful, topic, _values("forgotten", 3))
    other = _producer(broker.bootstrap, f"expiry-{uuid.uuid4().hex[:8]}")
    other.begin_transaction()
    _send(other, topic, _values("later", 2))
    other.commit_transaction(TIMEOUT)
    # The forgotten transaction held back read_committed consumers until it was aborted.
    wait_until(lambda: _read_all(broker.bootstrap, topic, "read_committed")
               == _values("later", 2), "the timed-out transaction to be aborted")


def test_a_transaction_timeout_above_the_brokers_maximum_is_refused(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory({"transaction.max.timeout.ms": "10000"})
    producer = confluent_kafka.Producer({
        "bootstrap.servers": broker.bootstrap, "transactional.id": "too-long",
        "transaction.timeout.ms": 20000,
    })
    with pytest.raises(confluent_kafka.KafkaException) as raised:
        producer.init_transactions(TIMEOUT)
    assert raised.value.args[0].code() == confluent_kafka.KafkaError.INVALID_TRANSACTION_TIMEOUT


def test_a_committed_offset_an_open_transaction_moves_waits_for_the_transaction(
    kafka_bootstrap: str,
) -> None:
    """KIP-447: librdkafka asks OffsetFetch with require_stable; the broker answers
    UNSTABLE_OFFSET_COMMIT while the offsets are pending, and the client retries."""
    source = create_topic(kafka_bootstrap, "stable-in")
    group = f"stable-{uuid.uuid4().hex[:8]}"
    producer = _producer(kafka_bootstrap, f"stable-{uuid.uuid4().hex[:8]}")
    consumer = _consumer(kafka_bootstrap, "read_committed", group)
    producer.begin_transaction()
    producer.send_offsets_to_transaction([TopicPartition(source, 0, 7)],
                                         consumer.consumer_group_metadata(), TIMEOUT)
    committer = threading.Timer(2.0, producer.commit_transaction, args=(TIMEOUT,))
    committer.start()
    [found] = consumer.committed([TopicPartition(source, 0)], TIMEOUT)
    committer.join()
    consumer.close()
    assert found.offset == 7  # not the "nothing committed" of before the transaction ended


def test_a_transaction_open_across_a_broker_crash_commits_after_recovery(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    """The broker is killed -9 mid-transaction: on restart it rebuilds the open transaction
    from the log (producer state, transaction index) and the coordinator's state from
    __transaction_state, and the producer carries on."""
    broker = broker_factory()
    topic = create_topic(broker.bootstrap, "crash")
    producer = _producer(broker.bootstrap, f"crash-{uuid.uuid4().hex[:8]}")
    producer.begin_transaction()
    _send(producer, topic, _values("aborted", 2))
    producer.abort_transaction(TIMEOUT)
    producer.begin_transaction()
    _send(producer, topic, _values("kept", 3))
    broker.kill()
    broker.start()
    assert _read_all(broker.bootstrap, topic, "read_committed", open_ok=True) == []
    producer.commit_transaction(TIMEOUT)
    assert _read_all(broker.bootstrap, topic, "read_committed") == _values("kept", 3)
