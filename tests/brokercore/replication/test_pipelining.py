"""A connection's produce requests run concurrently; responses still leave in order."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

from kafka.protocol.producer import ProduceRequest, ProduceResponse

from brokercore.protocol.errors import ErrorCode
from tests.brokercore.wire import record_batch

from .harness import Cluster, eventually


def produce_frame(correlation_id: int, topic: str, acks: int, value: bytes) -> bytes:
    data = ProduceRequest.TopicProduceData
    request = ProduceRequest(transactional_id=None, acks=acks, timeout_ms=60000,
                             topic_data=[data(name=topic, partition_data=[
                                 data.PartitionProduceData(index=0,
                                                           records=record_batch([value]))])])
    request.with_header(correlation_id=correlation_id, client_id="pipelined")
    return bytes(request.encode(version=8, header=True, framed=True))


async def read_response(reader: asyncio.StreamReader) -> tuple[int, int]:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    frame = await reader.readexactly(size)
    (correlation_id,) = struct.unpack_from(">i", frame)
    response = ProduceResponse.decode(frame[4:], version=8)
    return correlation_id, response.responses[0].partition_responses[0].error_code


async def test_an_acks_all_wait_does_not_hold_up_the_next_produce(tmp_path: Path) -> None:
    cluster = await Cluster(tmp_path, 2, {"replica.lag.time.max.ms": "600000"}).start()
    try:
        await cluster.create_topic("replicated", [1, 2])
        await cluster.create_topic("single", [1])
        await cluster.stop_node(2)
        reader, writer = await asyncio.open_connection("127.0.0.1", cluster.nodes[1].server.port)
        writer.write(produce_frame(1, "replicated", -1, b"waits for 2"))
        writer.write(produce_frame(2, "single", 1, b"does not wait"))
        await writer.drain()
        single = cluster.nodes[1].partition("single")
        await eventually(lambda: single.log_end_offset == 1, "the second produce is appended")
        # ...while the first still waits: nothing it wrote is committed.
        assert cluster.nodes[1].partition("replicated").high_watermark == 0

        await cluster.restart_node(2)  # its fetches move the HW and release the first
        assert await read_response(reader) == (1, ErrorCode.NONE)
        assert await read_response(reader) == (2, ErrorCode.NONE)
        writer.close()
    finally:
        await cluster.stop()
