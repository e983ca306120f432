"""CreatePartitions (37): grow topics, placed by the controller or by the request.

Every requested topic gets a result, successes included: Tansu answered with an empty
list, which clients read as "nothing happened".
"""

from collections import Counter
from typing import Any

from kafka.protocol.admin import CreatePartitionsRequest, CreatePartitionsResponse

from brokercore.controller.controller import ControllerError
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclOperation

Result = CreatePartitionsResponse.CreatePartitionsTopicResult


@serves(CreatePartitionsRequest, CreatePartitionsResponse, min_version=0, max_version=3)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    counts = Counter(t.name for t in request.topics)
    results = []
    for topic in request.topics:
        try:
            if counts[topic.name] > 1:
                raise ControllerError(ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
            if not broker.authorizer.authorize_topic(ctx, AclOperation.ALTER, topic.name):
                raise ControllerError(ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                      "Authorization failed.")
            assignments = (None if topic.assignments is None
                           else [list(a.broker_ids) for a in topic.assignments])
            await broker.controller.create_partitions(
                topic.name, topic.count, validate_only=request.validate_only,
                assignments=assignments,
            )
        except ControllerError as exc:
            results.append(Result(name=topic.name, error_code=exc.error_code,
                                  error_message=exc.message))
        else:
            results.append(Result(name=topic.name, error_code=ErrorCode.NONE,
                                  error_message=None))
    if not request.validate_only:  # as CreateTopics: the new replicas here are open
        await broker.replicas.settled(within=max(request.timeout_ms, 0) / 1000)
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)
