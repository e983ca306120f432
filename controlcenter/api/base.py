"""What the groups and schemas API views share: `api.access`'s rules (reads as the pages
allow, changes need the view's `Capability`) and how an action's refusal is answered:
`{"error_code": "<Kafka or registry code>", "message": "..."}` with an HTTP status that
says what kind of refusal it is. Errors are raised as `ControlCenterError`s, rendered by
the platform's one exception handler (`apierrors`).
"""

from __future__ import annotations

from typing import Any, ClassVar

from drf_spectacular.utils import OpenApiParameter
from rest_framework.request import Request
from rest_framework.views import APIView

from apierrors import ApiError
from controlcenter import clusters
from controlcenter.access import Capability
from controlcenter.actions import ActionError
from controlcenter.api.access import AUTHENTICATION, PagesRules

# The HTTP status of a refusal, by its code; anything else is the caller's request (400).
STATUS_BY_CODE = {
    "UNAVAILABLE": 503, "NO_SUPERVISOR": 503,
    "GROUP_NOT_EMPTY": 409, "NON_EMPTY_GROUP": 409, "409": 409, "SCHEDULE_EXISTS": 409,
    "GROUP_ID_NOT_FOUND": 404, "UNKNOWN_TOPIC_OR_PART": 404,
    "40401": 404, "40402": 404, "40403": 404, "40408": 404,
    "42201": 422, "42202": 422, "42203": 422,  # the registry's own statuses for bad input
}


class ControlCenterView(APIView):
    authentication_classes = AUTHENTICATION
    permission_classes = [PagesRules]
    capability: ClassVar[Capability | None] = None


class ControlCenterError(ApiError):
    """The control center API's errors: Kafka's and the registry's names for a refusal,
    INVALID_REQUEST for a request the API cannot take."""

    def __init__(self, status: int, error_code: str, message: str,
                 fields: dict[str, Any] | None = None) -> None:
        super().__init__(status, error_code, message)
        self.fields = fields

    def body(self) -> dict[str, Any]:
        body = super().body()
        if self.fields is not None:  # a form's errors, field by field
            body["fields"] = self.fields
        return body


def refusal(exc: ActionError) -> ControlCenterError:
    code = exc.code_name or "INVALID_REQUEST"
    return ControlCenterError(STATUS_BY_CODE.get(code, 400), code, exc.message)


def form_errors(errors: Any) -> ControlCenterError:
    return ControlCenterError(400, "INVALID_REQUEST", errors.as_text(),
                              errors.get_json_data())


# --- the cluster of a list, a launch or a schedule (clusters.listed, clusters.checked) ---------

LISTED_CLUSTER = OpenApiParameter(
    "cluster", str, description="whose rows: a configured cluster's name (default: the "
                                "current cluster, the session's), or `all` for every cluster's")


def listed_cluster(request: Request) -> str | None:
    """The cluster whose rows a list answers with (None: every cluster's); 400
    UNKNOWN_CLUSTER for `?cluster=` naming no configured cluster."""
    try:
        return clusters.listed(request.query_params.get("cluster"))
    except clusters.UnknownCluster as exc:
        raise ControlCenterError(400, "UNKNOWN_CLUSTER", str(exc)) from exc


def target_cluster(request: Request, data: dict[str, Any], default: str) -> str:
    """The cluster a launch or schedule is for: the body's `cluster` (taken out of `data`),
    else `?cluster=`, else `default`; 400 UNKNOWN_CLUSTER for one not configured, never
    another cluster in its place."""
    name = str(data.pop("cluster", None) or request.query_params.get("cluster") or default)
    try:
        return clusters.checked(name)
    except clusters.UnknownCluster as exc:
        raise ControlCenterError(400, "UNKNOWN_CLUSTER", str(exc)) from exc
