"""Where the transaction coordinator keeps its state: the compacted `__transaction_state`.

It is kept like `__consumer_offsets` (`brokercore.coordinator.offsets_topic`): created
through the controller on first use, written on the partition leader and waited for until
the in-sync replicas have it, replayed from the log start when this broker comes to lead a
partition.
"""

from __future__ import annotations

from collections.abc import Iterator

from brokercore.coordinator.offsets_topic import BrokerOffsetsTopic

from .records import TxnRecord, decode_key, decode_value

TRANSACTION_STATE_TOPIC = "__transaction_state"


class TransactionStateTopic(BrokerOffsetsTopic):
    topic = TRANSACTION_STATE_TOPIC
    config_prefix = "transaction.state.log"

    def topic_configs(self, replication_factor: int) -> dict[str, str]:
        min_isr = min(self.config.get_int("transaction.state.log.min.isr"), replication_factor)
        return {**super().topic_configs(replication_factor),
                "min.insync.replicas": str(max(min_isr, 1))}

    def replay_states(self, partition: int) -> Iterator[tuple[str, TxnRecord | None]]:
        """(transactional id, its state or None for a tombstone), in log order."""
        for stored in self.read_batches(partition):
            for key, value in stored.records:
                transactional_id = decode_key(key)
                if transactional_id is not None:
                    yield transactional_id, None if value is None else decode_value(value)
