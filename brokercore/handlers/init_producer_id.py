"""InitProducerId (22): producer ids and epochs for idempotent producers.

Transactions are not implemented yet (COMPAT.md): a transactional id is refused.
"""

from typing import Any

from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode

MAX_EPOCH = 32767


@serves(InitProducerIdRequest, InitProducerIdResponse, min_version=0, max_version=4)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    def answer(code: ErrorCode, producer_id: int = -1, epoch: int = -1) -> Any:
        return InitProducerIdResponse(throttle_time_ms=0, error_code=code,
                                      producer_id=producer_id, producer_epoch=epoch)

    if request.transactional_id is not None:
        return answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    controller = broker.controller
    # KIP-360: an idempotent producer may ask to bump its own epoch after an error.
    if request.producer_id >= 0 and 0 <= request.producer_epoch < MAX_EPOCH - 1:
        return answer(ErrorCode.NONE, request.producer_id, request.producer_epoch + 1)
    return answer(ErrorCode.NONE, await controller.allocate_producer_id(), 0)
