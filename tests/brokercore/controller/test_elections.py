"""Leadership decisions on metadata images alone: no controller, no sockets, no clock."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokercore.controller import elections
from brokercore.controller.elections import ElectionType, Rejected
from brokercore.controller.records import FenceBrokerRecord
from brokercore.protocol.errors import ErrorCode
from brokercore.topic_partition import TopicPartition

from .images import TOPIC_ID, Images

TP0 = TopicPartition("t", 0)


def codes(results: dict[TopicPartition, Rejected | None]) -> dict[TopicPartition, ErrorCode | None]:
    return {tp: r.error_code if r else None for tp, r in results.items()}


def fence(images: Images, node: int, *, unclean: bool = False) -> None:
    images.write(elections.records_fence_broker(images.image, node, unclean_default=unclean))


def unfence(images: Images, node: int, *, unclean: bool = False) -> None:
    records = elections.records_unfence_broker(images.image, node, unclean_default=unclean)
    images.write([FenceBrokerRecord(node, False), *records])


# -- fencing ----------------------------------------------------------------------------------
def test_fencing_the_leader_elects_the_next_live_isr_member_in_replica_order() -> None:
    images = Images(3)
    images.partition(0, [1, 3, 2])
    fence(images, 1)
    part = images.part()
    assert (part.leader, part.isr, part.leader_epoch) == (3, [3, 2], 1)
    assert images.image.brokers[1].fenced


def test_fencing_a_follower_shrinks_the_isr_without_a_new_leader_epoch() -> None:
    images = Images(3)
    images.partition(0, [1, 2, 3])
    fence(images, 2)
    part = images.part()
    assert (part.leader, part.isr, part.leader_epoch, part.partition_epoch) == (1, [1, 3], 0, 1)


def test_the_last_isr_member_stays_in_the_isr_and_the_partition_goes_offline() -> None:
    images = Images(3)
    images.partition(0, [1, 2], isr=[1])
    fence(images, 1)
    part = images.part()
    assert (part.leader, part.isr, part.leader_epoch) == (-1, [1], 1)


def test_fencing_twice_or_an_unknown_broker_writes_nothing() -> None:
    images = Images(3)
    images.partition(0, [1, 2, 3])
    fence(images, 1)
    assert elections.records_fence_broker(images.image, 1) == []
    assert elections.records_fence_broker(images.image, 9) == []


def test_a_fence_with_unclean_election_allowed_elects_a_live_out_of_sync_replica() -> None:
    images = Images(3)
    images.partition(0, [1, 2], isr=[1])
    fence(images, 1, unclean=True)
    part = images.part()
    assert (part.leader, part.isr, part.leader_epoch) == (2, [2], 1)


def test_the_topic_override_beats_the_broker_default_for_unclean_election() -> None:
    images = Images(3)
    images.partition(0, [1, 2], isr=[1])
    images.topic_config("unclean.leader.election.enable", "false")
    fence(images, 1, unclean=True)
    assert images.part().leader == -1

    images = Images(3)
    images.partition(0, [1, 2], isr=[1])
    images.topic_config("unclean.leader.election.enable", "true")
    fence(images, 1, unclean=False)
    assert images.part().leader == 2


def test_controlled_shutdown_moves_leaderships_away_and_fences_the_broker() -> None:
    images = Images(3)
    images.partition(0, [2, 1, 3])
    images.partition(1, [3, 2, 1])
    images.write(elections.records_controlled_shutdown(images.image, 2))
    assert (images.part(0).leader, images.part(0).leader_epoch) == (1, 1)
    assert images.part(1).leader == 3 and images.part(1).isr == [3, 1]
    assert images.image.brokers[2].fenced


# -- replicas on a failed log dir (KIP-858) -----------------------------------------------------
def test_offline_replicas_leave_their_isrs_and_leaderships_and_the_broker_keeps_the_rest() -> None:
    images = Images(3)
    images.partition(0, [1, 2, 3])  # led by 1, from the failed dir
    images.partition(1, [2, 1, 3])  # 1 follows, from the failed dir
    images.partition(2, [1, 3, 2])  # led by 1, from its other dir
    images.write(elections.records_offline_replicas(
        images.image, 1, {TopicPartition("t", 0), TopicPartition("t", 1)}))
    assert (images.part(0).leader, images.part(0).isr, images.part(0).leader_epoch) == \
        (2, [2, 3], 1)
    assert (images.part(1).leader, images.part(1).isr) == (2, [2, 3])
    assert (images.part(2).leader, images.part(2).isr) == (1, [1, 3, 2])
    assert not images.image.brokers[1].fenced
    # Reported again in the next heartbeat: nothing more to change.
    assert elections.records_offline_replicas(images.image, 1, {TP0}) == []


def test_an_offline_last_isr_member_leaves_the_partition_without_a_leader() -> None:
    images = Images(3)
    images.partition(0, [1, 2], isr=[1])
    images.write(elections.records_offline_replicas(images.image, 1, {TP0}, unclean_default=True))
    part = images.part()
    # Not even an unclean election picks the broker whose replica is offline.
    assert part.leader == 2 and part.isr == [2]
    images = Images(3)
    images.partition(0, [1, 2], isr=[1])
    images.write(elections.records_offline_replicas(images.image, 1, {TP0}))
    assert (images.part().leader, images.part().isr) == (-1, [1])


# -- unfencing --------------------------------------------------------------------------------
def test_an_unfenced_last_isr_member_takes_the_leaderless_partition_back() -> None:
    images = Images(3)
    images.partition(0, [1, 2], isr=[1])
    fence(images, 1)
    unfence(images, 1)
    part = images.part()
    assert (part.leader, part.isr, part.leader_epoch) == (1, [1], 2)


def test_an_unfenced_out_of_sync_replica_leads_only_if_unclean_election_is_allowed() -> None:
    images = Images(3)
    images.partition(0, [1, 2], isr=[1])
    fence(images, 2)  # not in the ISR: nothing changes for the partition
    fence(images, 1)
    unfence(images, 2)
    assert images.part().leader == -1
    images.write(elections.records_fence_broker(images.image, 2))
    unfence(images, 2, unclean=True)
    assert (images.part().leader, images.part().isr) == (2, [2])


def test_unfencing_leaves_led_partitions_alone() -> None:
    images = Images(3)
    images.partition(0, [1, 2, 3])
    fence(images, 2)
    assert elections.records_unfence_broker(images.image, 2) == []


# -- AlterPartition ---------------------------------------------------------------------------
def alter(images: Images, isr: list[int], *, leader: int = 1, leader_epoch: int | None = None,
          partition_epoch: int | None = None) -> None:
    part = images.part()
    images.write(elections.records_alter_partition(
        images.image, TOPIC_ID, 0, leader,
        part.leader_epoch if leader_epoch is None else leader_epoch,
        part.partition_epoch if partition_epoch is None else partition_epoch, isr,
    ))


def test_alter_partition_shrinks_and_expands_the_isr() -> None:
    images = Images(3)
    images.partition(0, [1, 2, 3])
    alter(images, [1, 3])
    assert (images.part().isr, images.part().partition_epoch, images.part().leader_epoch) == (
        [1, 3], 1, 0)
    alter(images, [1, 3, 2])
    assert (images.part().isr, images.part().partition_epoch) == ([1, 3, 2], 2)


@pytest.mark.parametrize(("kwargs", "isr", "code"), [
    ({"leader": 2}, [1, 2], ErrorCode.FENCED_LEADER_EPOCH),
    ({"leader_epoch": 7}, [1, 2], ErrorCode.FENCED_LEADER_EPOCH),
    ({"partition_epoch": 5}, [1, 2], ErrorCode.INVALID_UPDATE_VERSION),
    ({}, [1, 4], ErrorCode.INELIGIBLE_REPLICA),  # not a replica
    ({}, [1, 3], ErrorCode.INELIGIBLE_REPLICA),  # fenced
    ({}, [2], ErrorCode.INVALID_REQUEST),  # without the leader
    ({}, [1, 1], ErrorCode.INVALID_REQUEST),
])
def test_alter_partition_rejects_with_kafkas_errors(
    kwargs: dict[str, int], isr: list[int], code: ErrorCode
) -> None:
    images = Images(4)
    images.partition(0, [1, 2, 3], isr=[1, 2])
    fence(images, 3)
    with pytest.raises(Rejected) as exc:
        alter(images, isr, **kwargs)
    assert exc.value.error_code == code


def test_alter_partition_of_an_unknown_partition() -> None:
    images = Images(3)
    with pytest.raises(Rejected) as exc:
        elections.records_alter_partition(images.image, TOPIC_ID, 5, 1, 0, 0, [1])
    assert exc.value.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_leader_epoch_older_than_a_fence_is_rejected() -> None:
    images = Images(3)
    images.partition(0, [1, 2, 3])
    fence(images, 1)
    unfence(images, 1)  # 2 leads now; 1 is back, out of the ISR
    with pytest.raises(Rejected) as exc:
        alter(images, [1, 2, 3], leader=1, leader_epoch=0)
    assert exc.value.error_code == ErrorCode.FENCED_LEADER_EPOCH


# -- ElectLeaders -----------------------------------------------------------------------------
def test_preferred_election_moves_leadership_back_to_the_first_replica() -> None:
    images = Images(3)
    images.partition(0, [1, 2, 3], leader=2)
    records, results = elections.records_elect_leaders(images.image, ElectionType.PREFERRED, [TP0])
    images.write(records)
    assert results == {TP0: None}
    assert (images.part().leader, images.part().leader_epoch) == (1, 1)


def test_preferred_election_errors() -> None:
    images = Images(3)
    images.partition(0, [1, 2, 3])
    images.partition(1, [3, 1, 2], isr=[1, 2], leader=1)
    missing = TopicPartition("t", 9)
    _, results = elections.records_elect_leaders(
        images.image, ElectionType.PREFERRED, [TP0, TopicPartition("t", 1), missing])
    assert codes(results) == {
        TP0: ErrorCode.ELECTION_NOT_NEEDED,
        TopicPartition("t", 1): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
        missing: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }


def test_electing_all_partitions_reports_only_those_that_needed_it() -> None:
    images = Images(3)
    images.partition(0, [1, 2, 3])
    images.partition(1, [2, 1, 3], leader=1)
    records, results = elections.records_elect_leaders(images.image, ElectionType.PREFERRED, None)
    assert results == {TopicPartition("t", 1): None} and len(records) == 1


def test_unclean_election_on_request_ignores_the_topic_config() -> None:
    images = Images(3)
    images.partition(0, [1, 2], isr=[1])
    fence(images, 1)
    tps = [TP0]
    _, results = elections.records_elect_leaders(images.image, ElectionType.UNCLEAN, tps)
    assert results == {TP0: None}
    records, _ = elections.records_elect_leaders(images.image, ElectionType.UNCLEAN, tps)
    images.write(records)
    assert (images.part().leader, images.part().isr) == (2, [2])
    _, results = elections.records_elect_leaders(images.image, ElectionType.UNCLEAN, tps)
    assert codes(results) == {TP0: ErrorCode.ELECTION_NOT_NEEDED}


def test_unclean_election_with_no_live_replica() -> None:
    images = Images(3)
    images.partition(0, [1, 2], isr=[1])
    fence(images, 2)
    fence(images, 1)
    _, results = elections.records_elect_leaders(images.image, ElectionType.UNCLEAN, [TP0])
    assert codes(results) == {TP0: ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE}


# -- auto rebalance ---------------------------------------------------------------------------
def test_auto_rebalance_moves_partitions_of_brokers_over_the_imbalance_threshold() -> None:
    images = Images(3)
    # broker 1 is preferred for 4 partitions and leads 3 (25% imbalanced);
    # broker 2 is preferred for 2 and leads none of them (100%), one is out of its ISR.
    for i in range(3):
        images.partition(i, [1, 2, 3])
    images.partition(3, [1, 2, 3], leader=2)
    images.partition(4, [2, 1, 3], leader=1)
    images.partition(5, [2, 1, 3], isr=[1, 3], leader=1)
    assert elections.preferred_elections(images.image, 10) == [
        TopicPartition("t", 3), TopicPartition("t", 4)]
    assert elections.preferred_elections(images.image, 25) == [TopicPartition("t", 4)]
    assert elections.preferred_elections(images.image, 100) == []


# -- invariants over random histories ---------------------------------------------------------
events = st.lists(st.tuples(st.sampled_from(["fence", "unfence", "shrink", "expand"]),
                            st.integers(1, 4)), max_size=30)


@settings(max_examples=150, deadline=None)
@given(events, st.booleans())
def test_leadership_invariants_hold_over_any_history(
    history: list[tuple[str, int]], unclean: bool
) -> None:
    images = Images(4)
    images.partition(0, [1, 2, 3])
    images.partition(1, [2, 3, 4])
    images.partition(2, [4, 1])
    for kind, node in history:
        before = {i: (p.leader, p.leader_epoch, list(p.isr))
                  for i, p in images.image.topics["t"].partitions.items()}
        apply_event(images, kind, node, unclean)
        live = elections.live_brokers(images.image)
        for i, part in images.image.topics["t"].partitions.items():
            leader, epoch, isr = before[i]
            assert part.isr and set(part.isr) <= set(part.replicas)
            assert part.leader == -1 or (part.leader in part.isr and part.leader in live)
            if part.leader == -1:
                assert unclean or not (set(part.isr) & live), "a live ISR member could lead"
            assert part.leader_epoch == epoch + (part.leader != leader)
            if not unclean and part.leader not in (-1, leader):
                assert part.leader in isr, "a clean election chose an out-of-sync replica"


def apply_event(images: Images, kind: str, node: int, unclean: bool) -> None:
    if kind == "fence":
        fence(images, node, unclean=unclean)
    elif kind == "unfence" and images.image.brokers[node].fenced:
        unfence(images, node, unclean=unclean)
    elif kind in ("shrink", "expand"):
        for index, part in list(images.image.topics["t"].partitions.items()):
            if part.leader == -1:
                continue
            if kind == "shrink":
                isr = [r for r in part.isr if r != node or r == part.leader]
            else:
                isr = [*part.isr, node] if node not in part.isr else part.isr
            try:
                images.write(elections.records_alter_partition(
                    images.image, TOPIC_ID, index, part.leader, part.leader_epoch,
                    part.partition_epoch, isr))
            except Rejected as exc:
                assert exc.error_code == ErrorCode.INELIGIBLE_REPLICA
