"""Who may see and who may change what in the control center.

Reading: pages are public on the embedded platform; with MILLRACE_UI_LOGIN_REQUIRED every
page needs a signed-in user (`PageLoginRequiredMiddleware`, `may_view` for websockets).
The registry and REST proxy APIs are never affected: Confluent clients do not log in to a
Django session.

Changing: every state change needs a signed-in user holding one `Capability`, a Django
permission on the `ClusterAccess` model (superusers hold them all). Action views take
`@requires(Capability.X)`: POST only, anonymous users are sent to the login page, users
without the permission get 403. The cluster's SCRAM users and ACLs are staff's alone
(`@requires_staff`).
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit

from asgiref.sync import iscoroutinefunction
from django.conf import settings
from django.contrib.auth.middleware import LoginRequiredMiddleware
from django.contrib.auth.models import AnonymousUser, User
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.utils.http import url_has_allowed_host_and_scheme

# Views of these packages are APIs with their own conventions, never pages.
API_MODULES = (
    "registry.", "restproxy.", "drf_spectacular.", "rest_framework.", "millrace.openapi",
)
# Pages that must answer without a session: the platform's readiness probe.
PUBLIC_URL_NAMES = frozenset({"healthz"})


class Capability(enum.StrEnum):
    """The permissions a state change can require, as `user.has_perm` names them."""

    OPERATE_CLUSTER = "controlcenter.operate_cluster"
    CHANGE_TOPICS = "controlcenter.change_topics"
    PRODUCE_MESSAGES = "controlcenter.produce_messages"
    CHANGE_GROUPS = "controlcenter.change_groups"
    CHANGE_SCHEMAS = "controlcenter.change_schemas"
    RUN_ANALYSES = "controlcenter.run_analyses"
    CHANGE_CONNECTORS = "controlcenter.change_connectors"

    @property
    def codename(self) -> str:
        return self.value.split(".", 1)[1]

    @property
    def description(self) -> str:
        from .models import ClusterAccess  # models need the app registry; this module not

        return str(dict(ClusterAccess._meta.permissions)[self.codename])


def may_view(user: User | AnonymousUser) -> bool:
    """Whether `user` may see pages and receive their live updates."""
    return bool(user.is_authenticated) or not settings.MILLRACE_UI_LOGIN_REQUIRED


class PageLoginRequiredMiddleware(LoginRequiredMiddleware):
    """Django's LoginRequiredMiddleware, applied to pages only and only when the setting
    is on. Views marked `login_not_required` (login, admin login) stay public."""

    def process_view(
        self,
        request: HttpRequest,
        view_func: Callable[..., Any],
        view_args: tuple[Any, ...],
        view_kwargs: dict[str, Any],
    ) -> HttpResponse | None:
        if not settings.MILLRACE_UI_LOGIN_REQUIRED or _is_public(request, view_func):
            return None
        return cast(
            "HttpResponse | None",
            super().process_view(request, view_func, view_args, view_kwargs),
        )


def _is_public(request: HttpRequest, view_func: Callable[..., Any]) -> bool:
    match = request.resolver_match
    return (
        getattr(view_func, "__module__", "").startswith(API_MODULES)
        or (match is not None and match.url_name in PUBLIC_URL_NAMES)
    )


View = TypeVar("View", bound=Callable[..., Any])


def requires(capability: Capability) -> Callable[[View], View]:
    """Guard an action view: POST only, signed in, holding `capability`.

    Works on sync and async views. Anonymous users are redirected to the login page and
    come back to the page they acted from; users without the permission get a 403 page.
    """

    def decorate(view: View) -> View:
        if iscoroutinefunction(view):

            @functools.wraps(view)
            async def async_guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
                user = await request.auser()
                refusal = _refusal(request, user)
                if refusal is not None:
                    return refusal
                if not await user.ahas_perm(capability.value):
                    raise _denied(capability)
                return await cast("Callable[..., Awaitable[Any]]", view)(
                    request, *args, **kwargs
                )

            return cast("View", async_guarded)

        @functools.wraps(view)
        def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
            refusal = _refusal(request, request.user)
            if refusal is not None:
                return refusal
            if not request.user.has_perm(capability.value):
                raise _denied(capability)
            return view(request, *args, **kwargs)

        return cast("View", guarded)

    return decorate


def requires_staff(view: View) -> View:
    """Guard an action on the cluster's users and ACLs: POST only, signed in, and staff
    (`is_staff`, or a superuser). Who may log in to the cluster and what they may do there
    is an administrator's business, not a capability to hand out with others."""

    @functools.wraps(view)
    def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        refusal = _refusal(request, request.user)
        if refusal is not None:
            return refusal
        if not is_staff(request.user):
            raise PermissionDenied("Only staff users manage the cluster's users and ACLs.")
        return view(request, *args, **kwargs)

    return cast("View", guarded)


def is_staff(user: User | AnonymousUser) -> bool:
    return bool(user.is_authenticated and (user.is_staff or user.is_superuser))


def _refusal(request: HttpRequest, user: User | AnonymousUser) -> HttpResponse | None:
    """The answer to a request that may not reach an action before its permission is
    even asked about."""
    if request.method != "POST":
        # A state change never happens over GET (a link, a prefetch, a crawler).
        return HttpResponseNotAllowed(["POST"])
    if not user.is_authenticated:
        return redirect_to_login(_came_from(request), settings.LOGIN_URL)
    return None


def _denied(capability: Capability) -> PermissionDenied:
    return PermissionDenied(
        f"This needs the permission “{capability.description}” ({capability.codename})."
    )


def _came_from(request: HttpRequest) -> str:
    """The page the form was on: where to return after signing in (never the action URL,
    which only answers POST)."""
    referer = request.headers.get("Referer", "")
    if referer and url_has_allowed_host_and_scheme(
        referer, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        parts = urlsplit(referer)
        return parts.path + (f"?{parts.query}" if parts.query else "")
    return "/"
