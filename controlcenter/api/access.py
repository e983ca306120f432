"""Who may call the control center's JSON API: the pages' rules, in DRF's terms.

Reading follows MILLRACE_UI_LOGIN_REQUIRED; every state change needs a signed-in user with
the action's `Capability` (a session with its CSRF token, or HTTP Basic for scripts).
Anonymous callers get 401/403 with a JSON body, never a redirect.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.authentication import BasicAuthentication, SessionAuthentication
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from controlcenter.access import Capability

AUTHENTICATION = [SessionAuthentication, BasicAuthentication]


class PagesRules(BasePermission):
    """Reads as the pages allow; writes need the view's `capability`."""

    message = "Sign in with a user holding the permission for this change."

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        signed_in = bool(user is not None and user.is_authenticated)
        if request.method in SAFE_METHODS:
            return signed_in or not settings.MILLRACE_UI_LOGIN_REQUIRED
        capability: Capability | None = getattr(view, "capability", None)
        if capability is None or not signed_in:
            return False
        return bool(user.has_perm(capability.value))
