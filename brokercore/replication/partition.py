"""One partition replica on this broker: its log, its leadership, its high watermark.

A `Partition` is owned by the broker's event loop; handlers read and append through it, and
fetchers waiting for data are woken by `appended`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from brokercore.log import AppendResult, LogConfig, PartitionLog
from brokercore.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class PartitionError(Exception):
    def __init__(self, error_code: ErrorCode, message: str = "") -> None:
        super().__init__(message or error_code.name)
        self.error_code = error_code


class Partition:
    def __init__(self, tp: TopicPartition, topic_id: str, log: PartitionLog) -> None:
        self.tp = tp
        self.topic_id = topic_id
        self.log = log
        self.leader = -1
        self.leader_epoch = -1
        self.replicas: list[int] = []
        self.isr: list[int] = []
        # A single replica's high watermark is its log end; replication moves it by the ISR.
        self.high_watermark = log.log_end_offset
        self._waiters: set[asyncio.Future[None]] = set()

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        # No transactions yet: everything below the high watermark is stable.
        return self.high_watermark

    def become_leader(self, leader_epoch: int, replicas: list[int], isr: list[int]) -> None:
        self.leader_epoch = leader_epoch
        self.replicas = list(replicas)
        self.isr = list(isr)
        self.high_watermark = self.log.log_end_offset

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """KIP-320: a client that knows a different epoch is fenced or ahead of us."""
        if current_leader_epoch == -1 or current_leader_epoch == self.leader_epoch:
            return
        if current_leader_epoch < self.leader_epoch:
            raise PartitionError(ErrorCode.FENCED_LEADER_EPOCH)
        raise PartitionError(ErrorCode.UNKNOWN_LEADER_EPOCH)

    def append_as_leader(self, records: bytes | memoryview) -> AppendResult:
        result = self.log.append_as_leader(records, self.leader_epoch)
        if len(self.isr) <= 1:
            self.high_watermark = self.log.log_end_offset
        self.appended()
        return result

    def appended(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def add_waiter(self, waiter: asyncio.Future[None]) -> None:
        self._waiters.add(waiter)

    def discard_waiter(self, waiter: asyncio.Future[None]) -> None:
        self._waiters.discard(waiter)

    def update_config(self, config: LogConfig) -> None:
        self.log.update_config(config)
