"""Transaction states (Kafka's `TransactionState`) and the transitions between them.

```
Empty ──AddPartitions/AddOffsets──▶ Ongoing ──EndTxn──▶ PrepareCommit ──markers──▶ CompleteCommit
  ▲                                   │  ▲                                           │
  │                                   │  └──────────────AddPartitions────────────────┤
  │        EndTxn(abort), timeout,    ▼                                              │
  │        InitProducerId (fence) PrepareAbort ──markers──▶ CompleteAbort ───────────┘
  └──────────InitProducerId (epoch bump)── Empty / CompleteCommit / CompleteAbort
                                                     │ transactional.id.expiration.ms
                                                     ▼
                                           Dead (a tombstone; the id is forgotten)
```
"""

from __future__ import annotations

import enum

from brokercore.protocol.errors import ErrorCode


class TxnState(enum.Enum):
    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")
    DEAD = (6, "Dead")
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence")

    @property
    def code(self) -> int:
        return self.value[0]

    @property
    def kafka_name(self) -> str:
        return self.value[1]

    @classmethod
    def from_code(cls, code: int) -> TxnState:
        for state in cls:
            if state.code == code:
                return state
        raise ValueError(f"unknown transaction status {code}")

    @property
    def completed(self) -> bool:
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @property
    def preparing(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)



# The states a transaction may move to each state from (Kafka's validPreviousStates).
VALID_PREVIOUS_STATES: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.ONGOING: frozenset({TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                                 TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
}


class TxnError(Exception):
    """A transaction request refused with a Kafka error code."""

    def __init__(self, error_code: ErrorCode, message: str = "") -> None:
        super().__init__(message or error_code.name)
        self.error_code = error_code


def fenced_for_version(code: ErrorCode, api_version: int, since: int) -> ErrorCode:
    """PRODUCER_FENCED (KIP-588) as clients of `api_version` know it: versions before
    `since` get INVALID_PRODUCER_EPOCH instead, as Kafka answers them."""
    if code == ErrorCode.PRODUCER_FENCED and api_version < since:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code
