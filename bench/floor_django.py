"""A bare Django async view with no middleware: the framework's floor (bench/http_bench.py).

Run as its own ASGI application, with Django configured here rather than from a settings
module, so that nothing of the platform (middleware, apps, database) stands in front of it.
"""

from django.conf import settings

settings.configure(
    DEBUG=False, ALLOWED_HOSTS=["*"], ROOT_URLCONF=__name__, MIDDLEWARE=[], INSTALLED_APPS=[],
    SECRET_KEY="bench-floor-only",
)

from django.core.asgi import get_asgi_application  # noqa: E402  (needs settings first)
from django.http import HttpRequest, HttpResponse  # noqa: E402
from django.urls import path  # noqa: E402

BODY = b'{"schemaType":"AVRO","schema":"{\\"type\\":\\"string\\"}"}'


async def floor(request: HttpRequest) -> HttpResponse:
    return HttpResponse(BODY, content_type="application/vnd.schemaregistry.v1+json")


urlpatterns = [path("floor", floor)]
application = get_asgi_application()
