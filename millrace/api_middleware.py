"""What the API handler puts in front of the registry and the REST proxy: async only.

The control center's MIDDLEWARE (sessions, auth, messages, CSRF, ...) are sync middleware:
under ASGI each one costs two hops to Django's single sync thread per request, which
serialises every request of a process. The APIs use none of them (no sessions, no users,
views are CSRF-exempt), so `asgi.py` serves them with API_MIDDLEWARE instead.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from asgiref.sync import markcoroutinefunction
from django.http import HttpRequest
from django.http.response import HttpResponseBase


class ContentLengthMiddleware:
    """Content-Length on every complete response (CommonMiddleware's job on the pages)."""

    sync_capable = False
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Awaitable[HttpResponseBase]]
                 ) -> None:
        self.get_response = get_response
        markcoroutinefunction(self)

    async def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = await self.get_response(request)
        if not response.streaming and not response.has_header("Content-Length"):
            response.headers["Content-Length"] = str(len(response.content))  # type: ignore[attr-defined]
        return response
