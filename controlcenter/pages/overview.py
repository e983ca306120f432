"""Overview: brokers and topics with their partitions, as a Kafka client sees them."""

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from clusterclient import ClusterRequestError, ClusterUnavailable
from controlcenter.connection import cluster


def overview(request: HttpRequest) -> HttpResponse:
    context: dict[str, object] = {"bootstrap_servers": settings.KAFKA_BOOTSTRAP_SERVERS}
    try:
        context["cluster"] = cluster().metadata()
    except (ClusterUnavailable, ClusterRequestError) as exc:
        context["error"] = str(exc)
    return render(request, "controlcenter/overview.html", context, status=200)
