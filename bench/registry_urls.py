"""The platform's URLs plus a bare async view returning constant JSON: the floor."""

from django.http import HttpRequest, HttpResponse
from django.urls import path

from controlcenter.urls import urlpatterns as platform_urlpatterns

BODY = b'{"schemaType":"AVRO","schema":"{\\"type\\":\\"string\\"}"}'


async def floor(request: HttpRequest) -> HttpResponse:
    return HttpResponse(BODY, content_type="application/vnd.schemaregistry.v1+json")


urlpatterns = [path("bench/floor", floor), *platform_urlpatterns]
