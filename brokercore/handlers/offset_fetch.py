"""OffsetFetch (9): committed offsets of a group, or of several groups at once from v8.

With `require_stable` (v7+, KIP-447), a partition whose offset an open transaction has
committed (TxnOffsetCommit, no marker yet) answers UNSTABLE_OFFSET_COMMIT, which consumers
retry, so a new member does not start from an offset the transaction is about to move.
"""

from collections import defaultdict
from typing import Any

from kafka.protocol.consumer import OffsetFetchRequest, OffsetFetchResponse

from brokercore.coordinator.state import GroupError, OffsetAndMetadata
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclOperation
from brokercore.topic_partition import TopicPartition

R = OffsetFetchResponse
Fetched = dict[TopicPartition, OffsetAndMetadata | None]


# v9 adds KIP-848 member ids and epochs, which Kafka checks for consumer groups only
# (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH); a null member id with epoch -1 is an admin's
# fetch. v10 (topic ids) is left out.
@serves(OffsetFetchRequest, OffsetFetchResponse, min_version=0, max_version=9)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    if ctx.api_version >= 8:
        return R(throttle_time_ms=0, groups=[_fetch_group(broker, ctx, g, ctx.api_version,
                                                          request.require_stable)
                                             for g in request.groups])
    wanted = _partitions(request.topics)
    stable = ctx.api_version >= 7 and request.require_stable
    try:
        if not broker.authorizer.authorize_group(ctx, AclOperation.DESCRIBE, request.group_id):
            raise GroupError(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        fetched = broker.groups.offsets.fetch(request.group_id, wanted)
        unstable = broker.groups.offsets.unstable(request.group_id) if stable else set()
    except GroupError as exc:
        if ctx.api_version >= 2:
            return R(throttle_time_ms=0, error_code=exc.error_code, topics=[])
        fetched, error = dict.fromkeys(wanted or []), exc.error_code  # v0-1: per partition
        unstable = set()
    else:
        error = ErrorCode.NONE
    denied = _denied(broker, ctx, fetched)
    if wanted is None:
        fetched = {tp: om for tp, om in fetched.items() if tp.topic not in denied}
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, topics=[
        R.OffsetFetchResponseTopic(name=topic, partitions=[
            R.OffsetFetchResponseTopic.OffsetFetchResponsePartition(
                **_partition(p, om, _stable(error, topic, p, unstable, denied)))
            for p, om in partitions
        ])
        for topic, partitions in _by_topic(fetched).items()
    ])


def _denied(broker: BrokerParts, ctx: RequestContext, fetched: Fetched) -> set[str]:
    """The topics of `fetched` the principal may not DESCRIBE. Kafka leaves them out of an
    answer for all of a group's offsets, and answers a named one TOPIC_AUTHORIZATION_FAILED."""
    return {topic for topic in {tp.topic for tp in fetched}
            if not broker.authorizer.authorize_topic(ctx, AclOperation.DESCRIBE, topic)}


def _fetch_group(broker: BrokerParts, ctx: RequestContext, group: Any, version: int,
                 stable: bool) -> Any:
    Group = R.OffsetFetchResponseGroup
    Topic = Group.OffsetFetchResponseTopics
    member = (group.member_id, group.member_epoch) if version >= 9 else None
    if not broker.authorizer.authorize_group(ctx, AclOperation.DESCRIBE, group.group_id):
        return Group(group_id=group.group_id, topics=[],
                     error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    try:
        fetched = broker.groups.offsets.fetch(group.group_id, _partitions(group.topics), member)
        unstable = broker.groups.offsets.unstable(group.group_id) if stable else set()
    except GroupError as exc:
        return Group(group_id=group.group_id, topics=[], error_code=exc.error_code)
    denied = _denied(broker, ctx, fetched)
    if group.topics is None:
        fetched = {tp: om for tp, om in fetched.items() if tp.topic not in denied}
    return Group(group_id=group.group_id, error_code=ErrorCode.NONE, topics=[
        Topic(name=topic, partitions=[
            Topic.OffsetFetchResponsePartitions(
                **_partition(p, om, _stable(ErrorCode.NONE, topic, p, unstable, denied)))
            for p, om in partitions
        ])
        for topic, partitions in _by_topic(fetched).items()
    ])


def _partitions(topics: Any) -> list[TopicPartition] | None:
    if topics is None:
        return None
    return [TopicPartition(t.name, p) for t in topics for p in t.partition_indexes]


def _by_topic(fetched: Fetched) -> dict[str, list[tuple[int, OffsetAndMetadata | None]]]:
    topics: dict[str, list[tuple[int, OffsetAndMetadata | None]]] = defaultdict(list)
    for tp, om in fetched.items():
        topics[tp.topic].append((tp.partition, om))
    return topics


def _stable(error: ErrorCode, topic: str, index: int,
            unstable: set[TopicPartition], denied: set[str]) -> ErrorCode:
    if topic in denied:
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if error == ErrorCode.NONE and TopicPartition(topic, index) in unstable:
        return ErrorCode.UNSTABLE_OFFSET_COMMIT
    return error


def _partition(index: int, om: OffsetAndMetadata | None, error: ErrorCode) -> dict[str, Any]:
    if om is None or error != ErrorCode.NONE:
        return {"partition_index": index, "committed_offset": -1,
                "committed_leader_epoch": -1, "metadata": "", "error_code": error}
    return {"partition_index": index, "committed_offset": om.offset,
            "committed_leader_epoch": om.leader_epoch, "metadata": om.metadata,
            "error_code": error}
