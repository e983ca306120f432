"""A partition leader's questions to a transaction coordinator (`TransactionVerifier`),
against a stand-in coordinator on a real socket that records each AddPartitionsToTxn and
answers as it is told: one request at a time per coordinator, questions batched, one per
transactional id, and the coordinator's answers as the leader passes them on."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from kafka.protocol.producer import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse

from brokercore.controller.image import BrokerRegistration, MetadataImage
from brokercore.handlers.add_partitions_to_txn import results_by_topic
from brokercore.protocol.errors import ErrorCode
from brokercore.protocol.framing import encode_response, parse_header, skip_tagged_fields
from brokercore.topic_partition import TopicPartition
from brokercore.txn.verification import TransactionVerifier

TP = TopicPartition("orders", 0)
Answer = Callable[[Any], ErrorCode]  # a transaction asked about -> its partitions' code


class StandInCoordinator:
    """Answers AddPartitionsToTxn v5 once `release` is set, each transaction by `answer`."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.requests: list[list[tuple[str, int, bool]]] = []
        self.release = asyncio.Event()
        self.release.set()
        self.asked = asyncio.Event()  # a request has come in
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                frame = memoryview(await reader.readexactly(size))
            except asyncio.IncompleteReadError:
                return
            header, pos = parse_header(frame)
            request = AddPartitionsToTxnRequest.decode(
                frame[skip_tagged_fields(frame, pos):], version=header.api_version)
            self.requests.append([(t.transactional_id, t.producer_epoch, t.verify_only)
                                  for t in request.transactions])
            self.asked.set()
            await self.release.wait()
            response = AddPartitionsToTxnResponse(
                throttle_time_ms=0, error_code=0, results_by_transaction=[
                    AddPartitionsToTxnResponse.AddPartitionsToTxnResult(
                        transactional_id=t.transactional_id, topic_results=results_by_topic(
                            {TopicPartition(topic.name, p): self.answer(t)
                             for topic in t.topics for p in topic.partitions}))
                    for t in request.transactions])
            writer.write(encode_response(header.correlation_id,
                                         response.encode(version=header.api_version),
                                         flexible_header=True))
            await writer.drain()


@pytest.fixture
async def coordinator() -> AsyncIterator[StandInCoordinator]:
    stand_in = StandInCoordinator(lambda t: ErrorCode.NONE)
    yield stand_in
    if stand_in.server is not None:
        stand_in.server.close()


async def _verifier(coordinator: StandInCoordinator, node: int = 2) -> TransactionVerifier:
    image = MetadataImage()
    image.brokers[node] = BrokerRegistration(node, "127.0.0.1", await coordinator.start())
    return TransactionVerifier(image, 1, lambda transactional_id: node, timeout=5.0)


async def test_questions_asked_while_one_is_out_go_together_in_the_next_request(
    coordinator: StandInCoordinator,
) -> None:
    verifier = await _verifier(coordinator)
    coordinator.release.clear()
    first = asyncio.ensure_future(verifier.verify("a", 1, 0, frozenset({TP})))
    await coordinator.asked.wait()
    later = [asyncio.ensure_future(verifier.verify(t, 1, 0, frozenset({TP}))) for t in "bc"]
    await asyncio.sleep(0)  # they queue behind the request that is out
    coordinator.release.set()
    assert await asyncio.gather(first, *later) == [{}, {}, {}]
    assert coordinator.requests == [[("a", 0, True)], [("b", 0, True), ("c", 0, True)]]
    await verifier.stop()


async def test_one_question_per_transactional_id_the_newest_epoch_wins(
    coordinator: StandInCoordinator,
) -> None:
    verifier = await _verifier(coordinator)
    coordinator.release.clear()
    blocker = asyncio.ensure_future(verifier.verify("other", 1, 0, frozenset({TP})))
    await coordinator.asked.wait()
    retried = asyncio.ensure_future(verifier.verify("t", 1, 3, frozenset({TP})))
    again = asyncio.ensure_future(verifier.verify("t", 1, 3, frozenset({TP})))
    newer = asyncio.ensure_future(verifier.verify("t", 1, 4, frozenset({TP})))
    await asyncio.sleep(0)
    older = await verifier.verify("t", 1, 2, frozenset({TP}))
    coordinator.release.set()
    assert list(await asyncio.gather(blocker, retried, again, newer)) == [
        {}, {TP: ErrorCode.NETWORK_EXCEPTION}, {TP: ErrorCode.INVALID_PRODUCER_EPOCH}, {}]
    assert older == {TP: ErrorCode.INVALID_PRODUCER_EPOCH}
    assert coordinator.requests[1] == [("t", 4, True)]
    await verifier.stop()


async def test_a_fenced_producer_is_told_of_its_epoch_and_an_absent_coordinator_is_named(
    coordinator: StandInCoordinator,
) -> None:
    coordinator.answer = lambda t: ErrorCode.PRODUCER_FENCED
    verifier = await _verifier(coordinator)
    assert await verifier.verify("t", 1, 0, frozenset({TP})) == {
        TP: ErrorCode.INVALID_PRODUCER_EPOCH}
    assert coordinator.requests == [[("t", 0, True)]]
    verifier.image.brokers[2].fenced = True
    assert await verifier.verify("t", 1, 0, frozenset({TP})) == {
        TP: ErrorCode.COORDINATOR_NOT_AVAILABLE}
    verifier.image.brokers[2].fenced = False
    assert coordinator.server is not None
    coordinator.server.close()
    await verifier.stop()  # drops its connection: the next question must connect again
    await coordinator.server.wait_closed()
    assert await verifier.verify("t", 1, 0, frozenset({TP})) == {
        TP: ErrorCode.NETWORK_EXCEPTION}
