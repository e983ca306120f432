"""The listener reads frames whole however the bytes arrive: a size prefix split across
reads, many requests in one send, a produce request far larger than the reader's head
buffer and cut at odd places, and a request following a large one in the same send
(`brokercore/frame_connection.py`); a frame over its eager limit is read whole too, and
one merely declared huge holds no memory the client did not send."""

from __future__ import annotations

import os
import socket
import struct
import time
import uuid
from pathlib import Path

from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.producer import ProduceRequest

from brokercore.frame_connection import EAGER_BYTES, HEAD_BYTES
from brokercore.protocol.errors import ErrorCode
from tests.brokercore.wire import WireClient, record_batch
from tests.brokerproc import BrokerProcess


def framed(request: object, correlation_id: int, version: int) -> bytes:
    request.with_header(correlation_id=correlation_id, client_id="frames")  # type: ignore[attr-defined]
    return bytes(request.encode(version=version, header=True, framed=True))  # type: ignore[attr-defined]


def produce_request(topic: str, records: bytes) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=None, acks=1, timeout_ms=5000,
        topic_data=[ProduceRequest.TopicProduceData(
            name=topic, partition_data=[ProduceRequest.TopicProduceData.PartitionProduceData(
                index=0, records=records)])])


def correlation_id(frame: bytes) -> int:
    return int(struct.unpack_from(">i", frame)[0])


def fetch_values(client: WireClient, topic: str) -> bytes:
    """Every record batch of partition 0 from offset 0, as raw bytes."""
    part = FetchRequest.FetchTopic.FetchPartition
    response = client.request(FetchRequest(
        replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=2**24, isolation_level=0,
        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[part(
            partition=0, fetch_offset=0, log_start_offset=-1, partition_max_bytes=2**24)])]),
        version=5)
    partition = response.responses[0].partitions[0]
    assert partition.error_code == ErrorCode.NONE
    return bytes(partition.records)


def test_a_request_sent_one_byte_at_a_time_is_answered(kafka_bootstrap: str) -> None:
    with WireClient(kafka_bootstrap) as client:
        client.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for byte in framed(ApiVersionsRequest(), 7, 0):
            client.send_raw(bytes([byte]))
            time.sleep(0.001)
        frame = client.read_frame()
    assert correlation_id(frame) == 7
    assert struct.unpack_from(">h", frame, 4)[0] == ErrorCode.NONE


def api_versions_v0(correlation: int, length: int) -> bytes:
    """A framed ApiVersions v0 request `length` bytes long (its client id pads it)."""
    client_id = b"c" * (length - 14)  # size, key, version, correlation id, id's length
    return struct.pack(">ihhih", length - 4, 18, 0, correlation, len(client_id)) + client_id


def test_many_requests_in_one_send_are_answered_in_order(kafka_bootstrap: str) -> None:
    # The first head buffer's worth ends 3 bytes into a size prefix, which must wait there
    # for its last byte; the first frame's size differs from it in those 3 bytes.
    length = 300
    first = HEAD_BYTES - 3 - length * ((HEAD_BYTES - 1000) // length)
    assert (first - 4) >> 8 != (length - 4) >> 8
    requests = api_versions_v0(1, first) + b"".join(
        api_versions_v0(n, length) for n in range(2, 201))
    with WireClient(kafka_bootstrap) as client:
        client.send_raw(requests)
        assert [correlation_id(client.read_frame()) for _ in range(200)] == list(range(1, 201))


def test_a_large_produce_cut_at_odd_places_is_written_whole(kafka_bootstrap: str) -> None:
    values = [os.urandom(50_000) for _ in range(8)]
    batch = record_batch(values)
    assert len(batch) > 10 * HEAD_BYTES
    with WireClient(kafka_bootstrap) as client:
        topic = client.create_topic(f"frames-{uuid.uuid4().hex[:8]}", 1)
        client.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        produce = produce_request(topic, batch)
        request = framed(produce, 1, 8)
        # A size prefix cut in two, then a head buffer's worth and a little more, then the
        # rest together with a whole small request after it.
        cuts = [2, 65, HEAD_BYTES + 3, len(request)]
        start = 0
        for cut in cuts[:-1]:
            client.send_raw(request[start:cut])
            start = cut
            time.sleep(0.05)
        client.send_raw(request[start:] + framed(ApiVersionsRequest(), 2, 0))
        produced = produce.header.get_response_class().decode(client.read_frame(), version=8,
                                                              header=True)
        assert produced.header.correlation_id == 1
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        assert correlation_id(client.read_frame()) == 2
        stored = fetch_values(client, topic)
    assert all(value in stored for value in values)


def test_a_request_over_the_eager_limit_is_read_whole_and_answered(kafka_bootstrap: str) -> None:
    value = os.urandom(EAGER_BYTES + 100_000)
    with WireClient(kafka_bootstrap) as client:
        topic = client.create_topic(f"frames-{uuid.uuid4().hex[:8]}", 1)
        produce = produce_request(topic, record_batch([value]))
        client.send_raw(framed(produce, 1, 8) + framed(ApiVersionsRequest(), 2, 0))
        produced = produce.header.get_response_class().decode(client.read_frame(), version=8,
                                                              header=True)
        # Read whole: the batch's own size check answers (max.message.bytes is 1 MB).
        assert produced.responses[0].partition_responses[0].error_code == \
            ErrorCode.MESSAGE_TOO_LARGE
        assert correlation_id(client.read_frame()) == 2


def resident_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_a_declared_huge_frame_holds_only_what_was_sent(kafka_broker: BrokerProcess) -> None:
    assert kafka_broker.proc is not None
    pid = kafka_broker.proc.pid
    before = resident_bytes(pid)
    clients = [WireClient(kafka_broker.bootstrap) for _ in range(3)]
    try:
        for client in clients:
            client.send_raw(struct.pack(">i", 90 * 2**20) + framed(ApiVersionsRequest(), 1, 0))
        with WireClient(kafka_broker.bootstrap) as other:  # the broker has read them by now
            assert other.request(ApiVersionsRequest(), version=0).error_code == ErrorCode.NONE
        assert resident_bytes(pid) - before < 64 * 2**20  # three eager buffers: 270 MiB
    finally:
        for client in clients:
            client.close()
