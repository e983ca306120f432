"""A broker stopped by SIGTERM answers the requests it has already received, then closes
the connection (`KafkaServer.stop`): a client gets the answer to a request the broker read,
not a dropped connection in its place (librdkafka's admin calls then fail with "Broker
transport failure", for a request the broker may have carried out)."""

from __future__ import annotations

import os
import signal
import socket
import struct
import time
from pathlib import Path

from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest

from brokercore.protocol.errors import ErrorCode
from tests.brokercore.wire import WireClient
from tests.brokerproc import BrokerProcess


def framed(request: object, correlation_id: int, version: int) -> bytes:
    request.with_header(correlation_id=correlation_id, client_id="stop")  # type: ignore[attr-defined]
    return bytes(request.encode(version=version, header=True, framed=True))  # type: ignore[attr-defined]


def long_poll(topic: str, max_wait_ms: int) -> FetchRequest:
    """A fetch of an empty partition: the broker holds it for max_wait_ms."""
    part = FetchRequest.FetchTopic.FetchPartition
    return FetchRequest(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=2**20,
        isolation_level=0, topics=[FetchRequest.FetchTopic(topic=topic, partitions=[part(
            partition=0, fetch_offset=0, log_start_offset=-1, partition_max_bytes=2**20)])])


def test_requests_received_before_a_stop_are_answered_then_the_connection_closes(
    tmp_path: Path,
) -> None:
    broker = BrokerProcess(tmp_path).start()
    try:
        with WireClient(broker.bootstrap) as client:
            topic = client.create_topic("stop-answers", 1)
            # A long poll, and a request queued behind it on the same connection (Kafka
            # answers a connection's requests in order): both are in the broker's hands
            # when SIGTERM comes; the fetch is still waiting when the listener stops.
            fetch_request = long_poll(topic, 500)  # librdkafka's fetch.wait.max.ms
            client.send_raw(framed(fetch_request, 1, 5) + framed(ApiVersionsRequest(), 2, 0))
            time.sleep(0.1)  # read by the broker (one loop turn) before the stop
            assert broker.proc is not None
            os.kill(broker.proc.pid, signal.SIGTERM)
            sent = time.monotonic()
            client.sock.settimeout(10.0)
            fetched = client.read_frame()
            versions = client.read_frame()
            answered = time.monotonic() - sent
            assert struct.unpack_from(">i", fetched)[0] == 1
            assert struct.unpack_from(">i", versions)[0] == 2
            fetch = fetch_request.header.get_response_class().decode(
                fetched, version=5, header=True)
            assert fetch.responses[0].partitions[0].error_code == ErrorCode.NONE
            assert client.is_closed_by_peer(timeout=10.0)  # then it closes, promptly
            # The answers came within the long poll's wait and the listener's drain, far
            # below a client's request timeout (30 s; the collector's 6 s), however loaded.
            assert answered < 5.0, answered
        assert broker.proc.wait(15) == 0
        assert "node 1: stopped" in broker.log()
        with socket.socket() as late:  # nothing listens any more
            assert late.connect_ex(("127.0.0.1", broker.port)) != 0
    finally:
        broker.kill()
