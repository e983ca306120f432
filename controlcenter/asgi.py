"""ASGI entry point: HTTP through Django, websockets through Channels.

Static files (our CSS/JS and the vendored Swagger UI) are served by Django's own static
files handler, so a single Daphne process needs nothing in front of it; put a CDN-less
reverse proxy or whitenoise in front only when traffic calls for it.
"""

import os

from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlcenter.settings")
django_asgi_app = ASGIStaticFilesHandler(get_asgi_application())

from channels.routing import ProtocolTypeRouter  # noqa: E402  (needs Django set up first)

application = ProtocolTypeRouter({"http": django_asgi_app})
