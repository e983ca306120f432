"""Serve the registry and the REST proxy at the root of their own ports.

Confluent clients are usually configured with a root URL (`http://host:8081`,
`http://host:8082`). The platform runs one ASGI server listening on several ports; a request
that arrives on the registry's or the proxy's port is routed with that app's root URLconf,
and every other port gets the control center's URLconf with both apps under prefixes.
"""

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse


class PortRoutingMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.urlconf_by_port = {
            str(settings.REGISTRY_PORT): "registry.root_urls",
            str(settings.RESTPROXY_PORT): "restproxy.root_urls",
        }

    def __call__(self, request: HttpRequest) -> HttpResponse:
        urlconf = self.urlconf_by_port.get(str(request.META.get("SERVER_PORT", "")))
        if urlconf is not None:
            request.urlconf = urlconf
        return self.get_response(request)
