"""Bad input gets the protocol's error or a closed connection, and the broker serves on."""

from __future__ import annotations

import struct
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.producer import ProduceRequest

from brokercore.protocol.errors import ErrorCode
from tests.brokercore.wire import WireClient, record_batch
from tests.compat.clients import new_topic


def api_versions_works(bootstrap: str) -> bool:
    with WireClient(bootstrap) as client:
        response = client.request(ApiVersionsRequest(), version=0)
        return bool(response.error_code == 0 and response.api_keys)


def produce(bootstrap: str, topic: str, records: bytes, acks: int = 1) -> Any:
    with WireClient(bootstrap) as client:
        client.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                       allow_auto_topic_creation=True), version=8)
        request = ProduceRequest(
            transactional_id=None, acks=acks, timeout_ms=5000,
            topic_data=[ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[ProduceRequest.TopicProduceData.PartitionProduceData(
                    index=0, records=records)])])
        response = client.request(request, version=8)
        return response.responses[0].partition_responses[0]


def test_unsupported_api_versions_request_gets_a_v0_error_body(kafka_bootstrap: str) -> None:
    for version in (5, 99):
        header = struct.pack(">hhih", 18, version, 42, 4) + b"test"
        with WireClient(kafka_bootstrap) as client:
            client.send_raw(struct.pack(">i", len(header)) + header)
            frame = client.read_frame()
        correlation_id, error_code, count = struct.unpack_from(">ihi", frame)
        entries = {struct.unpack_from(">hhh", frame, 10 + 6 * i) for i in range(count)}
        assert correlation_id == 42
        assert error_code == ErrorCode.UNSUPPORTED_VERSION
        assert (18, 0, 4) in entries
        assert len(frame) == 10 + 6 * count  # nothing after the array: no throttle, no tags


def test_garbage_closes_only_that_connection(kafka_bootstrap: str) -> None:
    with WireClient(kafka_bootstrap) as bystander, WireClient(kafka_bootstrap) as client:
        client.send_raw(struct.pack(">i", 11) + b"\xff" * 11)
        assert client.is_closed_by_peer()
        assert bystander.request(ApiVersionsRequest(), version=0).error_code == 0


def test_oversized_frame_is_refused(kafka_bootstrap: str) -> None:
    with WireClient(kafka_bootstrap) as client:
        client.send_raw(struct.pack(">i", 2**31 - 1) + b"\x00" * 64)
        assert client.is_closed_by_peer()
    assert api_versions_works(kafka_bootstrap)


def test_unknown_api_key_closes_the_connection(kafka_bootstrap: str) -> None:
    header = struct.pack(">hhih", 9999, 0, 1, -1)
    with WireClient(kafka_bootstrap) as client:
        client.send_raw(struct.pack(">i", len(header)) + header)
        assert client.is_closed_by_peer()
    assert api_versions_works(kafka_bootstrap)


def test_batch_with_bad_crc_is_corrupt_message_and_not_written(kafka_bootstrap: str) -> None:
    topic = new_topic("crc")
    good = record_batch([b"first"])
    assert produce(kafka_bootstrap, topic, good).error_code == 0
    bad = bytearray(record_batch([b"second"]))
    bad[-1] ^= 0xFF  # flip a byte inside the CRC-covered records

    result = produce(kafka_bootstrap, topic, bytes(bad))

    assert result.error_code == ErrorCode.CORRUPT_MESSAGE
    # All or nothing: a record set with one good and one bad batch writes neither.
    mixed = produce(kafka_bootstrap, topic, good + bytes(bad))
    assert mixed.error_code == ErrorCode.CORRUPT_MESSAGE
    assert produce(kafka_bootstrap, topic, good).base_offset == 1


def test_oversized_batch_is_message_too_large(kafka_bootstrap: str) -> None:
    topic = new_topic("big")
    result = produce(kafka_bootstrap, topic, record_batch([b"x" * 1_100_000]))
    assert result.error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert produce(kafka_bootstrap, topic, record_batch([b"small"])).base_offset == 0


def test_invalid_topic_names_are_invalid_topic_exception(kafka_bootstrap: str) -> None:
    with WireClient(kafka_bootstrap) as client:
        metadata = client.request(MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name="bad/name")],
            allow_auto_topic_creation=True), version=8)
        assert metadata.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        created = client.request(CreateTopicsRequest(
            topics=[CreateTopicsRequest.CreatableTopic(
                name="x" * 250, num_partitions=1, replication_factor=1, assignments=[],
                configs=[])],
            timeout_ms=5000, validate_only=False), version=4)
        assert created.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(frame=st.binary(min_size=0, max_size=300), sized=st.booleans())
def test_fuzzed_frames_never_stop_the_broker(kafka_bootstrap: str, frame: bytes,
                                             sized: bool) -> None:
    with WireClient(kafka_bootstrap, timeout=2.0) as client:
        client.send_raw((struct.pack(">i", len(frame)) if sized else b"") + frame)
        client.is_closed_by_peer(timeout=0.2)
    assert api_versions_works(kafka_bootstrap)
