"""DeleteTopics (20): delete topics by name (v0-5) or by name or topic id (v6)."""

import uuid
from collections import Counter
from typing import Any

from kafka.protocol.admin import DeleteTopicsRequest, DeleteTopicsResponse

from brokercore.controller.controller import ControllerError
from brokercore.handlers.authorization import AUTHORIZATION_FAILED
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclOperation

Result = DeleteTopicsResponse.DeletableTopicResult
ZERO_UUID = uuid.UUID(int=0)


@serves(DeleteTopicsRequest, DeleteTopicsResponse, min_version=0, max_version=6)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    if ctx.api_version >= 6:
        targets = [(t.name, t.topic_id) for t in request.topics]
    else:
        targets = [(name, None) for name in request.topic_names]
    names = Counter(name for name, topic_id in targets if not _has_id(topic_id))
    ids = Counter(topic_id for _, topic_id in targets if _has_id(topic_id))
    responses = []
    for name, topic_id in targets:
        duplicate = ids[topic_id] > 1 if _has_id(topic_id) else names[name] > 1
        responses.append(await _delete(broker, ctx, name, topic_id, duplicate))
    return DeleteTopicsResponse(throttle_time_ms=0, responses=responses)


def _has_id(topic_id: Any) -> bool:
    return topic_id is not None and topic_id != ZERO_UUID


async def _delete(broker: BrokerParts, ctx: RequestContext, name: str | None, topic_id: Any,
                  duplicate: bool) -> Any:
    try:
        if duplicate:
            what = "id" if _has_id(topic_id) else "name"
            raise ControllerError(ErrorCode.INVALID_REQUEST, f"Duplicate topic {what}.")
        if _has_id(topic_id):
            topic = broker.image.topics_by_id.get(str(topic_id))
            if topic is None:
                raise ControllerError(ErrorCode.UNKNOWN_TOPIC_ID,
                                      "This server does not host this topic ID.")
            name = topic.name
        if name is None:
            raise ControllerError(ErrorCode.INVALID_REQUEST, "Invalid null topic name.")
        if not broker.authorizer.authorize_topic(ctx, AclOperation.DELETE, name):
            raise ControllerError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, AUTHORIZATION_FAILED)
        topic = broker.image.topics.get(name)
        topic_id = uuid.UUID(topic.topic_id) if topic else ZERO_UUID
        await broker.controller.delete_topic(name)
    except ControllerError as exc:
        return Result(name=name, topic_id=topic_id or ZERO_UUID, error_code=exc.error_code,
                      error_message=exc.message)
    return Result(name=name, topic_id=topic_id, error_code=ErrorCode.NONE, error_message=None)
