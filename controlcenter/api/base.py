"""What the groups and schemas API views share: `api.access`'s rules (reads as the pages
allow, changes need the view's `Capability`) and how an action's refusal is answered:
`{"error_code": "<Kafka or registry code>", "message": "..."}` with an HTTP status that
says what kind of refusal it is.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rest_framework.response import Response
from rest_framework.views import APIView

from controlcenter.access import Capability
from controlcenter.actions import ActionError
from controlcenter.api.access import AUTHENTICATION, PagesRules

# The HTTP status of a refusal, by its code; anything else is the caller's request (400).
STATUS_BY_CODE = {
    "UNAVAILABLE": 503, "NO_SUPERVISOR": 503,
    "GROUP_NOT_EMPTY": 409, "NON_EMPTY_GROUP": 409, "409": 409, "SCHEDULE_EXISTS": 409,
    "GROUP_ID_NOT_FOUND": 404, "UNKNOWN_TOPIC_OR_PART": 404,
    "40401": 404, "40402": 404, "40403": 404, "40408": 404,
}


class ControlCenterView(APIView):
    authentication_classes = AUTHENTICATION
    permission_classes = [PagesRules]
    capability: ClassVar[Capability | None] = None


def refusal(exc: ActionError) -> Response:
    code = exc.code_name or "INVALID_REQUEST"
    return Response({"error_code": code, "message": exc.message},
                    status=STATUS_BY_CODE.get(code, 400))


def form_errors(errors: Any) -> Response:
    return Response({"error_code": "INVALID_REQUEST", "message": errors.as_text(),
                     "fields": errors.get_json_data()}, status=400)
