"""The HTTP apps' one error base and the one DRF exception handler that renders it.

Every JSON API of the platform (the schema registry, the REST proxy, the control center's
`/api/v1/`) answers a failure with Confluent's body `{"error_code": ..., "message": ...}`:
each app raises its own `ApiError` subclass with its own codes (Confluent's numbers in the
registry and the proxy, Kafka's error names in the control center), and `exception_handler`,
DRF's EXCEPTION_HANDLER (the project's settings name it), renders it.

What is not yet an `ApiError` (a DRF error, Django's Http404, a Kafka client's exception)
is translated first by the view's `api_error(exc)` when the view has one: the app's own
mapping, which may also answer None for an exception that is no error (the registry and the
proxy raise one to run a view again elsewhere). Without it, DRF's errors keep their status
and their code, and anything else is logged and answered 500.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.http import Http404
from rest_framework import exceptions
from rest_framework.response import Response

logger = logging.getLogger(__name__)


class ApiError(Exception):
    """A failure as an HTTP status and Confluent's body."""

    def __init__(self, status: int, error_code: int | str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message

    def body(self) -> dict[str, Any]:
        return {"error_code": self.error_code, "message": self.message}


Translate = Callable[[Exception], ApiError | None]


def default_error(exc: Exception) -> ApiError:
    """An exception as an `ApiError` by DRF's and Django's own conventions."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    if isinstance(exc, exceptions.APIException):
        code = exc.get_codes()
        name = code.upper() if isinstance(code, str) else "INVALID_REQUEST"
        detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        return ApiError(exc.status_code, name, detail)
    logger.error("unexpected error", exc_info=exc)
    return ApiError(500, 500, "Internal server error")


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's EXCEPTION_HANDLER for every JSON API: the error, translated by the view's
    `api_error` when it has one, as Confluent's body."""
    translate: Translate = getattr(context.get("view"), "api_error", None) or default_error
    error = translate(exc)
    if error is None:
        return None  # not an error: the app runs the view again (its `api_error` says why)
    response = Response(error.body(), status=error.status)
    if isinstance(exc, exceptions.APIException):  # DRF's own headers (Allow, Retry-After)
        if getattr(exc, "auth_header", None):
            response["WWW-Authenticate"] = exc.auth_header  # type: ignore[attr-defined]
        if getattr(exc, "wait", None):
            response["Retry-After"] = str(int(exc.wait))  # type: ignore[attr-defined]
    return response
