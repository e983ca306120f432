"""Who may call the control center's JSON API: the pages' rules, in DRF's terms.

Reading follows MILLRACE_UI_LOGIN_REQUIRED; every state change needs a signed-in user with
the action's `Capability`. A caller signs in with a session (and its CSRF token), an API
token (`Authorization: Token <key>` or `Bearer <key>`, `apitokens.py`) or HTTP Basic.

With MILLRACE_HTTP_AUTH on, Basic is checked against the cluster's SCRAM users (httpauth,
the platform's one identity store) and every request needs credentials: without them the
answer is 401 with `WWW-Authenticate: Basic` in the API's error shape. A SCRAM user acts as
the Django user of the same name, made on first use without a password or permissions
(as Django's RemoteUserBackend does), so an administrator grants it capabilities; the
platform's `admin` is both. With it off, Basic checks Django's own users and reads follow
the pages, as before.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import (
    BaseAuthentication,
    BasicAuthentication,
    SessionAuthentication,
)
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

import httpauth
from controlcenter import apitokens
from controlcenter.access import Capability


class Unavailable(exceptions.APIException):
    status_code = 503
    default_code = "unavailable"
    default_detail = "Credentials could not be verified: the cluster did not answer."


def challenge() -> str:
    return f'Basic realm="{settings.MILLRACE_HTTP_AUTH_REALM}"'


class ApiSessionAuthentication(SessionAuthentication):
    """The browser's session. First in the list, so its challenge is the one DRF sends: none
    with HTTP auth off (an anonymous caller gets 403, as before), Basic with it on (401)."""

    def authenticate_header(self, request: Request) -> str | None:
        return challenge() if httpauth.enabled() else None


class ClusterBasicAuthentication(BasicAuthentication):
    """HTTP Basic: against the cluster's SCRAM users when MILLRACE_HTTP_AUTH is on, else
    against Django's users (DRF's BasicAuthentication)."""

    def authenticate_credentials(self, userid: str, password: str,
                                 request: Any = None) -> tuple[Any, Any]:
        if not httpauth.enabled():
            return super().authenticate_credentials(userid, password, request)
        try:
            principal = httpauth.authenticate_credentials(httpauth.CONTROLCENTER, userid,
                                                          password)
        except httpauth.Unauthorized as exc:
            raise exceptions.AuthenticationFailed(exc.message) from None
        except httpauth.Unavailable as exc:
            raise Unavailable(exc.message) from None
        return cluster_user(principal.username), principal


def cluster_user(username: str) -> User:
    """The Django user a SCRAM user acts as: made on first use, without a password."""
    user, created = User.objects.get_or_create(username=username)
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    if not user.is_active:
        raise exceptions.AuthenticationFailed("User inactive or deleted.")
    return user


class ApiTokenAuthentication(BaseAuthentication):
    """`Authorization: Token <key>` (DRF's keyword) or `Bearer <key>`."""

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        key = apitokens.key_of(request.META.get("HTTP_AUTHORIZATION"))
        if key is None:
            return None
        user = apitokens.user_for(key)
        if user is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        return user, key


AUTHENTICATION = [ApiSessionAuthentication, ClusterBasicAuthentication, ApiTokenAuthentication]


# The OpenAPI document's security schemes, so Swagger UI and generated clients know how to
# sign in (drf-spectacular finds extensions by their target class once this module loads;
# its registering __init_subclass__ is untyped, hence the ignores).
class SessionScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = ApiSessionAuthentication
    name = "session"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "apiKey", "in": "cookie", "name": settings.SESSION_COOKIE_NAME,
                "description": "The pages' sign-in; writes also send the CSRF token."}


class BasicScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = ClusterBasicAuthentication
    name = "basic"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "basic",
                "description": "The cluster's SCRAM users when HTTP auth is on (--secure), "
                               "else the control center's users."}


class TokenScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = ApiTokenAuthentication
    name = "token"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer",
                "description": "An API token from /account/api-token/ or `manage.py "
                               "drf_create_token`, as `Bearer <key>` (or DRF's `Token <key>`)."}


class PagesRules(BasePermission):
    """Reads as the pages allow (always signed in with HTTP auth on); writes need the
    view's `capability`."""

    message = "Sign in with a user holding the permission for this change."

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        signed_in = bool(user is not None and user.is_authenticated)
        if request.method in SAFE_METHODS:
            open_reads = not (settings.MILLRACE_UI_LOGIN_REQUIRED or httpauth.enabled())
            return signed_in or open_reads
        capability: Capability | None = getattr(view, "capability", None)
        if capability is None or not signed_in:
            return False
        return bool(user.has_perm(capability.value))
