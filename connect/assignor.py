"""How the leader spreads connectors and tasks over the workers.

`assign_eager` is Kafka's eager round robin (protocol `default`): everything anew each
generation, connectors then tasks, over the members sorted by id.

`IncrementalAssignor` follows Kafka's IncrementalCooperativeAssignor (KIP-415, protocol
`compatible`): each member keeps what it runs; what was deleted is revoked; what is new goes
to the least loaded member; what a departed worker ran ("lost") waits up to
`scheduled.rebalance.max.delay.ms` for that worker to come back, then goes to the least
loaded. When nothing was revoked and the load is uneven (a worker joined), the most loaded
give up their excess, which the next round hands to the least loaded: a worker that keeps
its tasks never stops them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from connect.protocol import TaskId, WorkerState


@dataclass
class Plan:
    connectors: set[str] = field(default_factory=set)
    tasks: set[TaskId] = field(default_factory=set)
    revoked_connectors: set[str] = field(default_factory=set)
    revoked_tasks: set[TaskId] = field(default_factory=set)
    delay_ms: int = 0


def assign_eager(members: dict[str, WorkerState], connectors: list[str],
                 tasks: list[TaskId]) -> dict[str, Plan]:
    order = sorted(members)
    plan = {m: Plan() for m in order}
    for i, name in enumerate(sorted(connectors)):
        plan[order[i % len(order)]].connectors.add(name)
    for i, task in enumerate(sorted(tasks)):
        plan[order[i % len(order)]].tasks.add(task)
    return plan


class IncrementalAssignor:
    def __init__(self, max_delay_ms: int) -> None:
        self.max_delay_ms = max_delay_ms
        self.previous: tuple[set[str], set[TaskId]] = (set(), set())
        self.lost_since_ms: float | None = None

    def assign(self, members: dict[str, WorkerState], connectors: list[str],
               tasks: list[TaskId], now_ms: float) -> dict[str, Plan]:
        plans = {m: Plan() for m in sorted(members)}
        self._keep_current(plans, members, set(connectors), set(tasks))
        held_c = {c for p in plans.values() for c in p.connectors}
        held_t = {t for p in plans.values() for t in p.tasks}
        free_c, free_t = set(connectors) - held_c, set(tasks) - held_t
        delay = self._hold_back_lost(free_c, free_t, now_ms)
        for name in sorted(free_c):
            min(plans.values(), key=lambda p: len(p.connectors)).connectors.add(name)
        for task in sorted(free_t):
            min(plans.values(), key=lambda p: len(p.tasks)).tasks.add(task)
        revoking = any(p.revoked_connectors or p.revoked_tasks for p in plans.values())
        if not revoking and not delay:
            _balance(plans)
        for plan in plans.values():
            plan.delay_ms = delay
        # What exists and is not revoked now is held (or held back) after this round; what a
        # later round finds unheld of it was lost with a worker.
        self.previous = (
            set(connectors) - {c for p in plans.values() for c in p.revoked_connectors},
            set(tasks) - {t for p in plans.values() for t in p.revoked_tasks})
        return plans

    @staticmethod
    def _keep_current(plans: dict[str, Plan], members: dict[str, WorkerState],
                      connectors: set[str], tasks: set[TaskId]) -> None:
        """Each member keeps what it runs that still exists (and that no member before it
        in id order claims too); the rest is revoked."""
        claimed_c: set[str] = set()
        claimed_t: set[TaskId] = set()
        for member, plan in plans.items():
            current = members[member].assignment
            if current is None:
                continue
            for name in current.connectors:
                target = plan.connectors if name in connectors and name not in claimed_c \
                    else plan.revoked_connectors
                target.add(name)
                claimed_c.add(name)
            for task in current.tasks:
                target_t = plan.tasks if task in tasks and task not in claimed_t \
                    else plan.revoked_tasks
                target_t.add(task)
                claimed_t.add(task)

    def _hold_back_lost(self, free_c: set[str], free_t: set[TaskId], now_ms: float) -> int:
        """Remove from the free sets what a departed worker ran, while its delay runs; the
        delay left, or 0."""
        lost_c, lost_t = free_c & self.previous[0], free_t & self.previous[1]
        if not (lost_c or lost_t) or self.max_delay_ms <= 0:
            self.lost_since_ms = None
            return 0
        if self.lost_since_ms is None:
            self.lost_since_ms = now_ms
        left = int(self.lost_since_ms + self.max_delay_ms - now_ms)
        if left <= 0:
            self.lost_since_ms = None
            return 0
        free_c -= lost_c
        free_t -= lost_t
        return left


def _balance(plans: dict[str, Plan]) -> None:
    """Revoke from the most loaded as many units as the members below an even share lack."""
    for kind in ("connectors", "tasks"):
        held: dict[str, set[Any]] = {m: getattr(p, kind) for m, p in plans.items()}
        floor = sum(len(h) for h in held.values()) // len(plans)
        shortfall = sum(max(0, floor - len(h)) for h in held.values())
        for _ in range(shortfall):
            member = max(held, key=lambda m: (len(held[m]), m))
            if len(held[member]) <= floor:
                break
            unit = max(held[member])
            held[member].discard(unit)
            getattr(plans[member], f"revoked_{kind}").add(unit)
