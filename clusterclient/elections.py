"""Preferred-leader elections (ElectLeaders, type PREFERRED) through a ClusterClient's admin.

    moved = elect_preferred_leaders(client, [TopicPartition("orders", 1)])  # None: every one

After a broker returns it rejoins the ISR as a follower; its partitions get their preferred
(first) replica back as leader only through an election, which a broker runs on its own every
`leader.imbalance.check.interval.seconds` or an operator asks for now. Kept apart from
client.py so the message browser's and the pages' additions stay small and separate.
"""

from __future__ import annotations

from collections.abc import Sequence

from confluent_kafka import ElectionType, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from clusterclient.client import ClusterClient
from clusterclient.errors import ClusterRequestError, result, translate
from clusterclient.metadata import TopicPartition


def elect_preferred_leaders(client: ClusterClient,
                            partitions: Sequence[TopicPartition] | None = None
                            ) -> dict[TopicPartition, ClusterRequestError | None]:
    """Per partition, None when its preferred replica leads now, or why not.

    ELECTION_NOT_NEEDED (it already leads) counts as done, as kafka-leader-election.sh
    reports it. Partitions None asks for every partition of the cluster.
    """
    asked = None if partitions is None else [
        KafkaTopicPartition(tp.topic, tp.partition) for tp in partitions]
    try:
        # confluent-kafka 2.16's binding fails on any timeout keyword here (a SystemError
        # from its argument parser), so the client's socket.timeout.ms bounds the request.
        future = client.admin.elect_leaders(ElectionType.PREFERRED, asked)
    except KafkaException as exc:
        raise translate(exc) from exc
    answers = result(future, client.timeout + 2.0)
    client.invalidate_metadata()
    return {TopicPartition(k.topic, k.partition): _outcome(k, error)
            for k, error in answers.items()}


def _outcome(partition: KafkaTopicPartition,
             error: KafkaError | KafkaException | None) -> ClusterRequestError | None:
    """The documented KafkaException, or (as 2.16 answers) a KafkaError value."""
    cause = error.args[0] if isinstance(error, KafkaException) and error.args else error
    if cause is None or cause.code() in (KafkaError.NO_ERROR, KafkaError.ELECTION_NOT_NEEDED):
        return None
    return ClusterRequestError(cause.code(), cause.name(), cause.str(), partition.topic,
                               partition.partition)
