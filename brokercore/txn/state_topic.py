"""Where the transaction coordinator keeps its state: the compacted `__transaction_state`.

It is kept like `__consumer_offsets` (`brokercore.coordinator.offsets_topic`): created
through the controller on first use, written on the partition leader and waited for until
the in-sync replicas have it, replayed from the log start when this broker comes to lead a
partition.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from brokercore.coordinator.offsets_topic import BrokerOffsetsTopic, MemoryOffsetsTopic
from brokercore.coordinator.records import StoredBatch, read_batches

from .records import TxnRecord, decode_key, decode_value

TRANSACTION_STATE_TOPIC = "__transaction_state"


class TransactionStore(Protocol):
    """What the coordinator needs of `__transaction_state` (`OffsetsStore`'s writes, and
    the states a partition replays to)."""

    @property
    def num_partitions(self) -> int: ...

    def leader_epoch(self, partition: int) -> int | None: ...

    def leader(self, partition: int) -> int: ...

    async def ensure_exists(self) -> None: ...

    def append(self, partition: int, records: list[tuple[bytes, bytes | None]],
               timestamp_ms: int) -> int: ...

    async def wait_replicated(self, partition: int, offset: int, timeout_ms: int) -> None: ...

    def replay_states(self, partition: int) -> Iterator[tuple[str, TxnRecord | None]]: ...


def _states(batches: Iterator[StoredBatch]) -> Iterator[tuple[str, TxnRecord | None]]:
    for stored in batches:
        for key, value in stored.records:
            transactional_id = decode_key(key)
            if transactional_id is not None:
                yield transactional_id, None if value is None else decode_value(value)


class TransactionStateTopic(BrokerOffsetsTopic):
    topic = TRANSACTION_STATE_TOPIC
    config_prefix = "transaction.state.log"

    def topic_configs(self, replication_factor: int) -> dict[str, str]:
        min_isr = min(self.config.get_int("transaction.state.log.min.isr"), replication_factor)
        return {**super().topic_configs(replication_factor),
                "min.insync.replicas": str(max(min_isr, 1))}

    def replay_states(self, partition: int) -> Iterator[tuple[str, TxnRecord | None]]:
        """(transactional id, its state or None for a tombstone), in log order."""
        return _states(self.read_batches(partition))


class MemoryTransactionStateTopic(MemoryOffsetsTopic):
    """`__transaction_state` in memory, every partition led here (the state machine's tests);
    replication is driven as in `MemoryOffsetsTopic`."""

    def replay_states(self, partition: int) -> Iterator[tuple[str, TxnRecord | None]]:
        return _states(stored for batch in self.batches[partition]
                       for stored in read_batches(batch))
