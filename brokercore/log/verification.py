"""Transaction verification state of one partition (KIP-890 part 1; Kafka's
VerificationGuard and VerificationStateEntry).

Before a producer's first transactional batch of a transaction is appended, the leader asks
the transaction coordinator whether the transaction includes this partition. Between that
question and the append, a marker may end what the coordinator vouched for: the guard is
what tells the two moments apart. It is created when verification starts and dropped
whenever a transactional batch or a marker of the producer is appended, so an append may
use it only if nothing of that producer's transactions happened here in between (with a
fresh guard per verification, a verified answer that arrives after an abort marker and a
new transaction cannot be used for the new one: the ABA case).
"""

from __future__ import annotations

from dataclasses import dataclass


class VerificationGuard:
    """An identity token: only the very guard a verification started with verifies."""

    __slots__ = ()

    def verifies(self, request_guard: VerificationGuard) -> bool:
        return request_guard is self and self is not SENTINEL


# What an append carries when it needed no verification (the transaction was already open
# here): it never verifies, so such an append is refused if that transaction has ended since.
SENTINEL = VerificationGuard()


@dataclass(slots=True)
class VerificationStateEntry:
    """A producer's verification in progress here: its guard, and the lowest sequence (at
    the newest epoch) that verification started with. A later batch must not overtake it:
    a producer new to the partition may start at any sequence (KIP-360), so without this a
    pipelined batch verified before an earlier, failed one would be appended first.

    `timestamp` is when the entry was created (wall clock, ms); later verifications that
    share it do not move it. As in Kafka, an entry expires `producer.id.expiration.ms`
    after it, so a failed verification's entry does not linger for good."""

    guard: VerificationGuard
    lowest_sequence: int
    epoch: int
    timestamp: int

    def update(self, sequence: int, epoch: int) -> None:
        if epoch > self.epoch:
            self.lowest_sequence, self.epoch = sequence, epoch
        elif epoch == self.epoch:
            self.lowest_sequence = min(self.lowest_sequence, sequence)
