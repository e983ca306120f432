"""HTTP Basic authentication (and the registry's authfile authorization) for the schema
registry and the REST proxy. Off unless `settings.MILLRACE_HTTP_AUTH` (README.md).

`authenticate(app, header)` answers the caller's `Principal` or raises `Unauthorized`
(401, 40101) / `Unavailable` (503); `respond(error, app)` renders such an error in the
API's shape with `WWW-Authenticate`. The project calls it in front of both APIs: the
Django middleware here (`BasicAuthMiddleware`) and the fast lane (`millrace/asgi.py`).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.http import HttpResponse

from apierrors import ApiError
from clusterclient.login import LoginUnavailable, VerifiedCache, kafka_login

from .authfile import AuthfileError, AuthfileWatch
from .basic import FORBIDDEN, UNAUTHORIZED, Forbidden, Unauthorized, Unavailable, parse_basic

__all__ = ["CONTROLCENTER", "FORBIDDEN", "UNAUTHORIZED", "Forbidden", "Principal",
           "Unauthorized", "Unavailable", "authenticate", "authenticate_credentials",
           "enabled", "guard_lane", "registry_authfile",
           "respond"]

REGISTRY, RESTPROXY = "registry", "restproxy"
CONTROLCENTER = "controlcenter"  # its /api/v1/ and lag metrics: the cluster's users too
CONTENT_TYPES = {REGISTRY: "application/vnd.schemaregistry.v1+json",
                 RESTPROXY: "application/vnd.kafka.v2+json", CONTROLCENTER: "application/json"}
SCOPE_KEY = "millrace.principal"  # where a lane request's principal is kept in the scope
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Principal:
    """Who called: the user, and the password they proved (for the proxy's own login as
    them). The password is never logged or shown."""

    username: str
    password: str = field(repr=False)


# The caller of the request being served, for code with no request at hand (the REST
# proxy's Kafka clients, `principal_config`). Set by the middleware and the lane guard;
# each ASGI request runs in a task of its own, so a value never outlives its request there.
current_principal: contextvars.ContextVar[Principal | None] = contextvars.ContextVar(
    "millrace_principal", default=None)


def enabled() -> bool:
    return bool(getattr(settings, "MILLRACE_HTTP_AUTH", False))


def kafka_config() -> dict[str, Any]:
    """The client config of a login as an HTTP user: the cluster's SASL listener."""
    config: dict[str, Any] = {
        "bootstrap.servers": (settings.MILLRACE_HTTP_AUTH_BOOTSTRAP_SERVERS
                              or settings.KAFKA_BOOTSTRAP_SERVERS),
        "security.protocol": settings.MILLRACE_HTTP_AUTH_SECURITY_PROTOCOL,
        "sasl.mechanisms": settings.MILLRACE_HTTP_AUTH_SASL_MECHANISM,
    }
    if settings.MILLRACE_HTTP_AUTH_SSL_CA_LOCATION:
        config["ssl.ca.location"] = settings.MILLRACE_HTTP_AUTH_SSL_CA_LOCATION
    return config


def principal_config(principal: Principal) -> dict[str, Any]:
    """A Kafka client config that logs in as the principal (the REST proxy's clients)."""
    return {**kafka_config(), "sasl.username": principal.username,
            "sasl.password": principal.password}


verified = VerifiedCache()
_authfiles: dict[str, AuthfileWatch] = {}


def registry_authfile() -> AuthfileWatch | None:
    """The registry's Karapace authfile, when `MILLRACE_REGISTRY_AUTHFILE` names one."""
    path = getattr(settings, "MILLRACE_REGISTRY_AUTHFILE", "")
    if not path:
        return None
    if path not in _authfiles:
        try:
            _authfiles[path] = AuthfileWatch(path)
        except (OSError, AuthfileError) as exc:
            # never an open registry, never a 500: refused until the file reads
            logger.error("registry authfile %s unreadable: %s", path, exc)
            raise Unavailable("The registry's authfile cannot be read") from None
    return _authfiles[path]


def _store_key(app: str, username: str) -> str:
    """The cache's key: an authfile's user is not the cluster's user of the same name."""
    uses_authfile = app == REGISTRY and registry_authfile() is not None
    return f"authfile\0{username}" if uses_authfile else username


def cached(app: str, header: str | None) -> Principal | None:
    """The principal without blocking, from an accepted login still cached; else None.
    Raises Unauthorized for a header that is no Basic credential."""
    username, password = parse_basic(header)
    if verified.hit(_store_key(app, username), password):
        return Principal(username, password)
    return None


def authenticate(app: str, header: str | None) -> Principal:
    """The caller, from the Authorization header. Blocking: a login to the cluster, or an
    authfile's password hash (scrypt takes tens of milliseconds), so not on a loop."""
    principal = cached(app, header)
    if principal is not None:
        return principal
    username, password = parse_basic(header)
    return authenticate_credentials(app, username, password)


def authenticate_credentials(app: str, username: str, password: str) -> Principal:
    """`authenticate` for a user name and password already read from a header."""
    if verified.hit(_store_key(app, username), password):
        return Principal(username, password)
    authfile = registry_authfile() if app == REGISTRY else None
    if authfile is not None:
        accepted = authfile.current().authenticate(username, password)
    else:
        try:
            accepted = kafka_login(kafka_config(), username, password,
                                   settings.MILLRACE_HTTP_AUTH_TIMEOUT_S)
        except LoginUnavailable as exc:
            raise Unavailable(f"Credentials could not be verified: the cluster did not "
                              f"answer ({exc})") from None
    if not accepted:
        raise Unauthorized("Unauthorized: unknown user or wrong password")
    verified.add(_store_key(app, username), password, settings.MILLRACE_HTTP_AUTH_CACHE_S)
    return Principal(username, password)


def respond(error: ApiError, app: str) -> HttpResponse:
    """An authentication or authorization failure in the API's own shape."""
    response = HttpResponse(json.dumps(error.body()), status=error.status,
                            content_type=CONTENT_TYPES[app])
    if error.status == 401:
        response["WWW-Authenticate"] = f'Basic realm="{settings.MILLRACE_HTTP_AUTH_REALM}"'
    return response


LaneRoute = tuple[str, Any, Any]  # (method, pattern, handler): millrace.asgi.LaneRoutes


def guard_lane(app: str, routes: list[LaneRoute]) -> list[LaneRoute]:
    """An app's fast-lane routes, each authenticating first when auth is on: a failure is
    answered by the lane itself (401 in the API's shape), the principal is kept in the
    scope (`SCOPE_KEY`) for the view."""

    def guard(handler: Any) -> Any:
        async def handle(scope: dict[str, Any], params: dict[str, str], body: Any) -> Any:
            if enabled():
                header = next((value.decode("latin-1") for name, value in scope["headers"]
                               if name.lower() == b"authorization"), None)
                try:
                    principal = cached(app, header) or await asyncio.to_thread(
                        authenticate, app, header)
                except ApiError as error:
                    return respond(error, app)
                scope[SCOPE_KEY] = principal
                current_principal.set(principal)  # this request's task only
            return await handler(scope, params, body)

        return handle

    return [(method, pattern, guard(handler)) for method, pattern, handler in routes]
