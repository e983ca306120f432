"""SaslHandshake (17): pick the connection's SASL mechanism (v1: SaslAuthenticate follows,
v0: bare tokens follow, as aiokafka still sends them)."""

from typing import Any

from kafka.protocol.sasl import SaslHandshakeRequest, SaslHandshakeResponse

from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.sasl import SaslAuthenticator


@serves(SaslHandshakeRequest, SaslHandshakeResponse, min_version=0, max_version=1)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    if not isinstance(ctx.sasl, SaslAuthenticator):
        # A listener without SASL: Kafka answers ILLEGAL_SASL_STATE and serves on.
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    result = ctx.sasl.handshake(request.mechanism, ctx.api_version)
    return SaslHandshakeResponse(error_code=result.error_code, mechanisms=result.mechanisms)
