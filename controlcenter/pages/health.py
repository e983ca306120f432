"""Liveness: the web server answers. (Cluster health is on the overview.)"""

from django.http import HttpRequest, HttpResponse


def healthz(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok", content_type="text/plain")
