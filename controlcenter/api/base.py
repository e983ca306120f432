"""What every control-center API view shares: who may read and who may change, and how an
action's refusal is answered.

Reading follows the pages (public unless MILLRACE_UI_LOGIN_REQUIRED). Changing needs a
signed-in user (session with CSRF, or HTTP Basic for scripts) holding the view's
`Capability`; anonymous callers get 401, users without the permission 403. Refusals are
`{"error_code": "<Kafka or registry code>", "message": "..."}`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.contrib.auth.models import AnonymousUser
from rest_framework.authentication import BasicAuthentication, SessionAuthentication
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlcenter.access import Capability, may_view
from controlcenter.actions import ActionError

# The HTTP status of a refusal, by its code; anything else is the caller's request (400).
STATUS_BY_CODE = {
    "UNAVAILABLE": 503, "NO_SUPERVISOR": 503,
    "GROUP_NOT_EMPTY": 409, "NON_EMPTY_GROUP": 409, "409": 409,
    "GROUP_ID_NOT_FOUND": 404, "UNKNOWN_TOPIC_OR_PART": 404,
    "40401": 404, "40402": 404, "40403": 404, "40408": 404,
}


class CapabilityPermission(BasePermission):
    message = "This needs a signed-in user with the permission."

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user or AnonymousUser()
        if request.method in SAFE_METHODS:
            return may_view(user)
        capability = getattr(view, "capability", None)
        return bool(user.is_authenticated and capability is not None
                    and user.has_perm(capability.value))


class ControlCenterView(APIView):
    # Basic first: an anonymous caller is told how to authenticate (401, WWW-Authenticate).
    authentication_classes = [BasicAuthentication, SessionAuthentication]
    permission_classes = [CapabilityPermission]
    capability: ClassVar[Capability | None] = None


def refusal(exc: ActionError) -> Response:
    code = exc.code_name or "INVALID_REQUEST"
    return Response({"error_code": code, "message": exc.message},
                    status=STATUS_BY_CODE.get(code, 400))


def form_errors(errors: Any) -> Response:
    return Response({"error_code": "INVALID_REQUEST", "message": errors.as_text(),
                     "fields": errors.get_json_data()}, status=400)
