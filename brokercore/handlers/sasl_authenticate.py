"""SaslAuthenticate (36): one round of the mechanism chosen by SaslHandshake v1.

A failure answers SASL_AUTHENTICATION_FAILED with the reason, and the server closes the
connection once that answer is written (the authenticator's `closing`). The answer that
completes authentication carries `session_lifetime_ms` (v1+) from
`connections.max.reauth.ms` (KIP-368).
"""

from typing import Any

from kafka.protocol.sasl import SaslAuthenticateRequest, SaslAuthenticateResponse

from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.sasl import SaslAuthenticator


@serves(SaslAuthenticateRequest, SaslAuthenticateResponse, min_version=0, max_version=2)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    if not isinstance(ctx.sasl, SaslAuthenticator):
        return SaslAuthenticateResponse(
            error_code=ErrorCode.ILLEGAL_SASL_STATE,
            error_message="SaslAuthenticate request received on a listener without SASL",
            auth_bytes=b"", session_lifetime_ms=0)
    result = ctx.sasl.authenticate(bytes(request.auth_bytes))
    return SaslAuthenticateResponse(
        error_code=result.error_code, error_message=result.error_message,
        auth_bytes=result.auth_bytes, session_lifetime_ms=result.session_lifetime_ms)
