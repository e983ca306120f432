"""`TransactionMetadata`: one transactional id as its coordinator holds it."""

from __future__ import annotations

from dataclasses import dataclass

from .records import TxnRecord


@dataclass
class TransactionMetadata:
    transactional_id: str
    partition: int  # of __transaction_state
    record: TxnRecord  # the state the log holds; replaced only by `transit`
    pending: bool = False  # a transition is being written: others wait their turn
    # The epoch a KIP-360 InitProducerId last bumped from, so that its retry gets the same
    # answer; in memory only, as in Kafka.
    last_producer_epoch: int = -1
