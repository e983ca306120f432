"""Moving one member of a KIP-848 group towards its target assignment, safely.

The rule (Kafka's CurrentAssignmentBuilder): a member first revokes what it must give up,
staying at its epoch, and is given new partitions only once it has reported them gone;
a partition another member still holds is not handed out until that member releases it.
So no partition ever has two owners. The member then takes the target's epoch:

    STABLE ──target moved──▶ UNREVOKED_PARTITIONS ──owned partitions reported──▶ ...
       ▲                      (epoch kept; the response lists only the kept ones)
       └──────── UNRELEASED_PARTITIONS ◀── some new partition still held by another
                 (target epoch; gets the rest as the others release them)
"""

from __future__ import annotations

from dataclasses import dataclass

from .consumer_group import Assignment, ConsumerMember, MemberState


@dataclass(frozen=True)
class MemberAssignment:
    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned: Assignment
    pending_revocation: Assignment


def current(member: ConsumerMember) -> MemberAssignment:
    return MemberAssignment(member.member_epoch, member.previous_member_epoch, member.state,
                            member.assigned, member.pending_revocation)


def reconcile(
    member: ConsumerMember, target_epoch: int, target: Assignment,
    others: dict[tuple[str, int], str], reported: Assignment | None,
) -> MemberAssignment:
    """The member's next assignment. `others` are the partitions other members hold;
    `reported` the partitions the member says it owns (None: not sent this time)."""
    now = current(member)
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if reported is None or _still_owns(reported, member.pending_revocation):
            return now
        return _next(member, min(member.member_epoch + 1, target_epoch), target_epoch,
                     target, others)
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, others)
    if member.member_epoch != target_epoch:
        return _next(member, member.member_epoch, target_epoch, target, others)
    return now


def _still_owns(reported: Assignment, pending: Assignment) -> bool:
    return any(reported.get(topic_id, frozenset()) & parts for topic_id, parts in pending.items())


def _next(
    member: ConsumerMember, epoch: int, target_epoch: int, target: Assignment,
    others: dict[tuple[str, int], str],
) -> MemberAssignment:
    kept: Assignment = {}
    revoke: Assignment = {}
    gained: Assignment = {}
    unreleased = False
    for topic_id in member.assigned.keys() | target.keys():
        have = member.assigned.get(topic_id, frozenset())
        want = target.get(topic_id, frozenset())
        _put(kept, topic_id, have & want)
        _put(revoke, topic_id, have - want)
        free = frozenset(p for p in want - have if (topic_id, p) not in others)
        unreleased = unreleased or len(free) < len(want - have)
        _put(gained, topic_id, have & want | free)
    previous = member.member_epoch
    if revoke:
        return MemberAssignment(epoch, member.previous_member_epoch if epoch == previous
                                else previous, MemberState.UNREVOKED_PARTITIONS, kept, revoke)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return MemberAssignment(target_epoch, previous if target_epoch != previous
                            else member.previous_member_epoch, state, gained, {})


def _put(assignment: Assignment, topic_id: str, parts: frozenset[int]) -> None:
    if parts:
        assignment[topic_id] = parts
