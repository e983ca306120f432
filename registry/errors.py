"""The registry's one error type, an `apierrors.ApiError`, and its translation of other
exceptions for the platform's one exception handler (`apierrors.exception_handler`).

Every failure leaves the registry as the Confluent body `{"error_code": N, "message": "..."}`
with Confluent's codes and messages, including DRF's own 404/405/406/415 and bodies that
are not JSON. Constructors are named for the Confluent condition they report.
"""

from __future__ import annotations

import logging

from django.http import Http404
from rest_framework import exceptions

from apierrors import ApiError

from .cache import NotInMemory

logger = logging.getLogger(__name__)


class RegistryError(ApiError):
    error_code: int  # Confluent's numbers

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(status, error_code, message)


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(version: int | str) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(schema_id: int | None = None) -> RegistryError:
    message = "Schema not found" if schema_id is None else f"Schema {schema_id} not found"
    return RegistryError(404, 40403, message)


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(
        404, 40404, f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently"
    )


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(
        404, 40405, f"Subject '{subject}' was not deleted first before being permanently deleted"
    )


def version_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(
        404,
        40406,
        f"Subject '{subject}' Version {version} was soft deleted."
        "Set permanent=true to delete permanently",
    )


def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(
        404,
        40407,
        f"Subject '{subject}' Version {version} was not deleted first "
        "before being permanently deleted",
    )


def subject_config_not_found(subject: str) -> RegistryError:
    return RegistryError(
        404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured"
    )


def subject_mode_not_found(subject: str) -> RegistryError:
    return RegistryError(
        404, 40409, f"Subject '{subject}' does not have subject-level mode configured"
    )


def incompatible_schema(subject: str, messages: list[str]) -> RegistryError:
    # Confluent sent 409 as the error_code until late 2025 and most deployed servers still do.
    details = ", ".join(messages)
    return RegistryError(
        409,
        409,
        "Schema being registered is incompatible with an earlier schema for subject "
        f'"{subject}", details: [{details}]',
    )


def invalid_schema(reason: str) -> RegistryError:
    return RegistryError(422, 42201, f"Invalid schema: {reason}")


def invalid_schema_type(schema_type: str) -> RegistryError:
    return RegistryError(422, 42201, f"Invalid schema type {schema_type}")


def invalid_version(version: str) -> RegistryError:
    return RegistryError(
        422,
        42202,
        f"The specified version '{version}' is not a valid version id. "
        'Allowed values are between [1, 2^31-1] and the string "latest"',
    )


def invalid_compatibility_level() -> RegistryError:
    return RegistryError(
        422,
        42203,
        "Invalid compatibility level. Valid values are none, backward, forward, full, "
        "backward_transitive, forward_transitive, and full_transitive",
    )


def invalid_mode() -> RegistryError:
    return RegistryError(
        422, 42204, "Invalid mode. Valid values are READWRITE, READONLY, IMPORT and FORWARD."
    )


def operation_not_permitted(message: str) -> RegistryError:
    return RegistryError(422, 42205, message)


def referenced_schema(subject: str, version: int) -> RegistryError:
    return RegistryError(
        422,
        42206,
        f"One or more references exist to the schema {{subject={subject},version={version}}}.",
    )


def imported_id_mismatch() -> RegistryError:
    return RegistryError(422, 42207, "The ID of an imported schema does not match the existing ID")


def store_error(message: str) -> RegistryError:
    return RegistryError(500, 50001, message)


def http_error(status: int, reason: str) -> RegistryError:
    """Jersey's bodies for errors raised before a resource method runs."""
    return RegistryError(status, status, f"HTTP {status} {reason}")


_DRF_ERRORS: dict[type[exceptions.APIException], tuple[int, str]] = {
    exceptions.NotFound: (404, "Not Found"),
    exceptions.MethodNotAllowed: (405, "Method Not Allowed"),
    exceptions.NotAcceptable: (406, "Not Acceptable"),
    exceptions.UnsupportedMediaType: (415, "Unsupported Media Type"),
}


def as_registry_error(exc: Exception) -> RegistryError:
    if isinstance(exc, RegistryError):
        return exc
    if isinstance(exc, Http404):
        return http_error(404, "Not Found")
    for drf_type, (status, reason) in _DRF_ERRORS.items():
        if isinstance(exc, drf_type):
            return http_error(status, reason)
    if isinstance(exc, exceptions.ParseError):
        return RegistryError(400, 400, f"Unrecognized request body: {exc.detail}")
    if isinstance(exc, exceptions.APIException):
        return RegistryError(exc.status_code, exc.status_code, str(exc.detail))
    logger.exception("registry request failed")
    return store_error(f"Error in the backend data store: {type(exc).__name__}")


def api_error(exc: Exception) -> RegistryError | None:
    """The registry views' `api_error`, which `apierrors.exception_handler` renders."""
    if isinstance(exc, NotInMemory):
        return None  # not an error: the view is run again with the database
    return as_registry_error(exc)
