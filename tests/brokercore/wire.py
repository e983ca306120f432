"""A raw Kafka wire client for tests that need to send what real clients never would."""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from kafka.protocol.admin import CreateTopicsRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from brokercore.protocol.errors import ErrorCode


class WireClient:
    def __init__(self, bootstrap: str, timeout: float = 10.0,
                 source_host: str | None = None) -> None:
        """`source_host` binds the connection's own end (another loopback IP, such as
        127.0.0.2: a client the broker sees coming from another host)."""
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection(
            (host, int(port)), timeout=timeout,
            source_address=None if source_host is None else (source_host, 0))
        self.correlation_id = 0

    @classmethod
    def as_soon_as_listening(cls, bootstrap: str, limit: float = 60.0) -> WireClient:
        """Connected the moment a starting broker listens (to see what it answers first)."""
        deadline = time.monotonic() + limit
        while True:
            try:
                return cls(bootstrap)
            except ConnectionRefusedError:
                assert time.monotonic() < deadline, "the broker never listened"
                time.sleep(0.005)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._read_exactly(4))[0]
        return self._read_exactly(size)

    def _read_exactly(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def request(self, request: Any, version: int) -> Any:
        """Send a kafka-python protocol request object; decode the response for version."""
        self.correlation_id += 1
        request.with_header(correlation_id=self.correlation_id, client_id="wire-test")
        self.send_raw(bytes(request.encode(version=version, header=True, framed=True)))
        frame = self.read_frame()
        response_class = request.header.get_response_class()
        return response_class.decode(frame, version=version, header=True)

    def create_topic(self, name: str, partitions: int) -> str:
        """CreateTopics (v4) of one topic, replication factor 1; its name once created."""
        created = self.request(CreateTopicsRequest(
            topics=[CreateTopicsRequest.CreatableTopic(
                name=name, num_partitions=partitions, replication_factor=1, assignments=[],
                configs=[])],
            timeout_ms=5000, validate_only=False), version=4)
        assert created.topics[0].error_code == ErrorCode.NONE, created
        return name

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False


def record_batch(values: list[bytes], key: bytes | None = b"k", codec: int = 0,
                 timestamp: int = 1_700_000_000_000) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=0,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=2**30)
    for i, value in enumerate(values):
        builder.append(i, timestamp=timestamp + i, key=key, value=value, headers=[])
    return bytes(builder.build())
