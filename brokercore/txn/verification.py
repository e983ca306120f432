"""The partition leader's questions to transaction coordinators (KIP-890 part 1; Kafka's
AddPartitionsToTxnManager): does this transaction include these partitions?

A Produce handler asks before a producer's first transactional batch of a transaction is
appended here. The question is an AddPartitionsToTxn (v4+) with `verify_only`, sent over
the Kafka protocol to the leader of the transactional id's `__transaction_state` partition,
this broker included, as markers are (`markers.py`). Questions for one coordinator are
batched: one request at a time per coordinator, and whatever arrives while it is out goes
together in the next one.

Answers are per partition, only the failures, in the coordinator's terms with two of
Kafka's translations for the producer: PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH (what
a producer expects from a write), CLUSTER_AUTHORIZATION_FAILED INVALID_TXN_STATE. A
coordinator that cannot be named or reached is COORDINATOR_NOT_AVAILABLE or
NETWORK_EXCEPTION; the Produce handler turns those into its own retriable answer.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafka.protocol.producer import AddPartitionsToTxnRequest

from brokercore.controller.image import MetadataImage
from brokercore.protocol.errors import ErrorCode
from brokercore.replication.connection import BrokerConnection, ConnectionFailed
from brokercore.security.connection import PLAINTEXT_CLIENT, ClientSecurity
from brokercore.topic_partition import TopicPartition

log = logging.getLogger(__name__)

Transaction = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
VERSION = 5  # what a Kafka 4.0 broker sends: v4+ carry batches and verify_only
Errors = dict[TopicPartition, ErrorCode]


@dataclass
class _Question:
    producer_id: int
    producer_epoch: int
    partitions: frozenset[TopicPartition]
    answer: asyncio.Future[Errors] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future())

    def settle(self, errors: Errors) -> None:
        if not self.answer.done():  # its Produce may have been cancelled meanwhile
            self.answer.set_result(errors)

    def fail_all(self, code: ErrorCode) -> None:
        self.settle(dict.fromkeys(self.partitions, code))


class TransactionVerifier:
    def __init__(self, image: MetadataImage, node_id: int,
                 coordinator_of: Callable[[str], int], timeout: float,
                 security: ClientSecurity = PLAINTEXT_CLIENT) -> None:
        self.security = security
        self.image = image
        self.node_id = node_id
        self.coordinator_of = coordinator_of  # transactional id -> leader of its partition
        self.timeout = timeout
        self._queued: dict[int, dict[str, _Question]] = defaultdict(dict)
        self._senders: dict[int, asyncio.Task[None]] = {}
        self._connections: dict[int, BrokerConnection] = {}

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: frozenset[TopicPartition]) -> Errors:
        """The partitions the transaction does not include, or whose check failed, each
        with its error; empty when every one is verified."""
        node = self.coordinator_of(transactional_id)
        broker = self.image.brokers.get(node)
        if broker is None or broker.fenced:
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        question = _Question(producer_id, producer_epoch, partitions)
        queued = self._queued[node]
        earlier = queued.get(transactional_id)
        if earlier is not None:
            # One question per transactional id per request, as Kafka keeps it: a newer epoch
            # fences the earlier question; the same epoch is a retry, which replaces it.
            if earlier.producer_epoch > producer_epoch:
                return dict.fromkeys(partitions, ErrorCode.INVALID_PRODUCER_EPOCH)
            earlier.fail_all(ErrorCode.INVALID_PRODUCER_EPOCH
                             if earlier.producer_epoch < producer_epoch
                             else ErrorCode.NETWORK_EXCEPTION)
        queued[transactional_id] = question
        if node not in self._senders:
            self._senders[node] = asyncio.create_task(self._send_queued(node))
        return await asyncio.shield(question.answer)

    async def _send_queued(self, node: int) -> None:
        """One request at a time to `node`, each taking every question queued by then."""
        try:
            while self._queued.get(node):
                questions = self._queued.pop(node)
                try:
                    await self._ask(node, questions)
                except Exception:  # a bug must not leave its Produce requests waiting
                    log.exception("node %d: verifying transactions with broker %d failed",
                                  self.node_id, node)
                finally:
                    # Those still unanswered: left out of the response, or _ask failed.
                    for question in questions.values():
                        question.fail_all(ErrorCode.UNKNOWN_SERVER_ERROR)
        finally:
            del self._senders[node]

    async def _ask(self, node: int, questions: dict[str, _Question]) -> None:
        request = AddPartitionsToTxnRequest(transactions=[
            Transaction(transactional_id=transactional_id, producer_id=q.producer_id,
                        producer_epoch=q.producer_epoch, verify_only=True,
                        topics=_topics(q.partitions))
            for transactional_id, q in questions.items()])
        try:
            connection = await self._open(node)
            response = await connection.request(request, VERSION)
        except ConnectionFailed as exc:
            log.info("node %d: verifying transactions with broker %d failed: %s",
                     self.node_id, node, exc)
            self._drop(node)
            for question in questions.values():
                question.fail_all(ErrorCode.NETWORK_EXCEPTION)
            return
        if response.error_code != ErrorCode.NONE:
            code = (ErrorCode.INVALID_TXN_STATE
                    if response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                    else ErrorCode(response.error_code))
            for question in questions.values():
                question.fail_all(code)
            return
        for result in response.results_by_transaction:
            answered = questions.get(result.transactional_id)
            if answered is not None:
                answered.settle(_unverified(result))

    async def _open(self, node: int) -> BrokerConnection:
        connection = self._connections.get(node)
        if connection is None:
            broker = self.image.brokers.get(node)
            if broker is None:
                raise ConnectionFailed(f"broker {node} left the cluster")
            connection = await BrokerConnection.open(
                broker.host, broker.port, f"txn-verifier-{self.node_id}", self.timeout,
                self.security)
            self._connections[node] = connection
        return connection

    def _drop(self, node: int) -> None:
        connection = self._connections.pop(node, None)
        if connection is not None:
            connection.close()

    async def stop(self) -> None:
        for sender in list(self._senders.values()):
            sender.cancel()
        for node in list(self._connections):
            self._drop(node)


def _unverified(result: Any) -> Errors:
    errors: Errors = {}
    for topic in result.topic_results:
        for p in topic.results_by_partition:
            if p.partition_error_code != ErrorCode.NONE:
                code = ErrorCode(p.partition_error_code)
                # Producers expect INVALID_PRODUCER_EPOCH from a write, as Kafka answers.
                errors[TopicPartition(topic.name, p.partition_index)] = (
                    ErrorCode.INVALID_PRODUCER_EPOCH if code == ErrorCode.PRODUCER_FENCED
                    else code)
    return errors


def _topics(partitions: frozenset[TopicPartition]) -> list[Any]:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for tp in partitions:
        by_topic[tp.topic].append(tp.partition)
    return [Topic(name=name, partitions=sorted(indexes)) for name, indexes in by_topic.items()]
