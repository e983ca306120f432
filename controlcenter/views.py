from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from .cluster import ClusterUnavailable, describe_cluster


def overview(request: HttpRequest) -> HttpResponse:
    """Brokers and topics with their partitions, as a Kafka client sees them."""
    context: dict[str, object] = {"bootstrap_servers": settings.KAFKA_BOOTSTRAP_SERVERS}
    try:
        context["cluster"] = describe_cluster()
    except ClusterUnavailable as exc:
        context["error"] = str(exc)
    return render(request, "controlcenter/overview.html", context, status=200)


def healthz(request: HttpRequest) -> HttpResponse:
    """Liveness: the web server answers. (Cluster health is on the overview.)"""
    return HttpResponse("ok", content_type="text/plain")
