"""A follower's side of a fetch session (KIP-227), as Kafka's FetchSessionHandler.

The first fetch to a leader is full, at epoch 0, and opens a session there. Each next one
is incremental: it sends only the partitions whose fetch state changed since the last
answered fetch (a new fetch offset, log start offset or leader epoch) and forgets those the
fetcher no longer fetches; the leader answers only partitions with news. Any session error,
and any request whose fate is unknown (a lost connection), sends the next fetch in full at
epoch 0 again, naming the old session so the leader drops it.
"""

from __future__ import annotations

from dataclasses import dataclass

from brokercore.protocol.errors import ErrorCode
from brokercore.topic_partition import TopicPartition

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
MAX_EPOCH = 2**31 - 1


@dataclass(frozen=True)
class PartitionFetch:
    """What the leader's session holds of one partition: what this follower last sent."""

    fetch_offset: int
    log_start_offset: int
    current_leader_epoch: int
    partition_max_bytes: int


@dataclass(frozen=True)
class SessionRequest:
    session_id: int
    epoch: int
    to_send: dict[TopicPartition, PartitionFetch]
    forgotten: list[TopicPartition]


class FollowerFetchSession:
    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self.partitions: dict[TopicPartition, PartitionFetch] = {}  # as the leader has them
        self._pending: dict[TopicPartition, PartitionFetch] = {}

    def build(self, wanted: dict[TopicPartition, PartitionFetch]) -> SessionRequest:
        """The next request for fetching `wanted`: all of it, or what changed."""
        self._pending = dict(wanted)
        if self.epoch == INITIAL_EPOCH:
            return SessionRequest(self.session_id, INITIAL_EPOCH, dict(wanted), [])
        to_send = {tp: f for tp, f in wanted.items() if self.partitions.get(tp) != f}
        forgotten = [tp for tp in self.partitions if tp not in wanted]
        return SessionRequest(self.session_id, self.epoch, to_send, forgotten)

    def answered(self, error_code: int, session_id: int) -> bool:
        """The leader's answer to the last request built; False if it must be ignored."""
        if error_code != ErrorCode.NONE:
            if error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self.session_id = INVALID_SESSION_ID
            self.reset()
            return False
        if self.epoch == INITIAL_EPOCH:
            # A new session, or none (the leader's cache had no room): then full again.
            self.session_id = session_id
            self.epoch = INITIAL_EPOCH if session_id == INVALID_SESSION_ID else 1
        else:
            self.epoch = 1 if self.epoch == MAX_EPOCH else self.epoch + 1
        self.partitions = self._pending
        return True

    def reset(self) -> None:
        """Start over with a full fetch; the leader then drops the old session."""
        self.epoch = INITIAL_EPOCH
        self.partitions = {}
