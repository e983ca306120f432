"""ASGI entry point: HTTP through Django, websockets through Channels.

Static files (our CSS/JS and the vendored Swagger UI) are served by Django's own static
files handler, so a single Daphne process needs nothing in front of it; put a CDN-less
reverse proxy or whitenoise in front only when traffic calls for it.

Websockets accept only pages of our own origin (AllowedHostsOriginValidator: the Origin
header's host must be in ALLOWED_HOSTS) and carry the session's user (AuthMiddlewareStack).
"""

import os

from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlcenter.settings")
django_asgi_app = ASGIStaticFilesHandler(get_asgi_application())

# These need Django set up first.
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from controlcenter.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter({
    "http": django_asgi_app,
    "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
})
