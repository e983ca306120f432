"""kill -9 mid-produce: every acknowledged message is there after restart, once, in order."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import confluent_kafka

from tests.brokerproc import BrokerProcess
from tests.compat.clients import confluent_consume_all, new_topic


def produce_until_killed(broker: BrokerProcess, topic: str, kill_after: int,
                         prefix: str) -> list[bytes]:
    """Produce acks=all until `kill_after` acks, kill -9 the broker, return what was acked."""
    acked: list[bytes] = []
    lock = threading.Lock()
    producer = confluent_kafka.Producer({
        "bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 2,
        "message.timeout.ms": 3000, "retries": 0,
    })

    def delivered(err: object, msg: confluent_kafka.Message) -> None:
        value = msg.value()
        if err is None and value is not None:
            with lock:
                acked.append(value)

    i = 0
    killed = False
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            producer.produce(topic, value=f"{prefix}-{i:07d}".encode(), partition=0,
                             on_delivery=delivered)
            i += 1
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
        with lock:
            enough = len(acked) >= kill_after
        if enough and not killed:
            broker.kill()
            killed = True
            break
    # Whatever was in flight fails now: written-but-unacked messages may or may not exist.
    producer.purge(in_queue=True, in_flight=True)
    producer.flush(1)
    with lock:
        return list(acked)


def test_every_acked_message_survives_kill_dash_nine(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory({"num.partitions": "1"})
    topic = new_topic("crash")
    all_acked: list[bytes] = []
    for round_no, kill_after in enumerate((300, 1500, 50)):
        acked = produce_until_killed(broker, topic, kill_after, f"r{round_no}")
        assert len(acked) >= kill_after
        all_acked += acked
        broker.start()

        stored = [m.value for m in confluent_consume_all(broker.bootstrap, topic)]
        stored_set = set(stored)
        missing = [v for v in all_acked if v not in stored_set]
        assert not missing, f"round {round_no}: {len(missing)} acked messages lost"
        assert len(stored) == len(set(stored)), "duplicates after recovery"
        positions = [stored.index(v) for v in all_acked]
        assert positions == sorted(positions), "acked messages out of order"
