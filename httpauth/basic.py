"""The Authorization header: HTTP Basic (RFC 7617), and the 401 answer."""

from __future__ import annotations

import base64
import binascii

from apierrors import ApiError

UNAUTHORIZED = 40101
FORBIDDEN = 40301


class Unauthorized(ApiError):
    """401: no credentials, credentials we cannot read, or ones the store refuses."""

    def __init__(self, message: str) -> None:
        super().__init__(401, UNAUTHORIZED, message)


class Forbidden(ApiError):
    """403: an authenticated user without the permission."""

    def __init__(self, message: str) -> None:
        super().__init__(403, FORBIDDEN, message)


class Unavailable(ApiError):
    """503: the credentials could not be checked (the cluster did not answer in time)."""

    def __init__(self, message: str) -> None:
        super().__init__(503, 50302, message)


def parse_basic(header: str | None) -> tuple[str, str]:
    """(username, password) from an Authorization header; Unauthorized for anything else:
    no header, another scheme, text that is not base64, no colon, not UTF-8."""
    if not header:
        raise Unauthorized("Unauthorized: credentials are required (HTTP Basic)")
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "basic" or not token.strip():
        raise Unauthorized("Unauthorized: only HTTP Basic authentication is accepted")
    try:
        decoded = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):  # UnicodeDecodeError is a ValueError
        raise Unauthorized("Unauthorized: the Basic credentials are not base64 of "
                           "UTF-8 text") from None
    username, colon, password = decoded.partition(":")
    if not colon or not username:
        raise Unauthorized("Unauthorized: the Basic credentials are not user:password")
    return username, password
