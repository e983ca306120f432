"""A small real app for testing the control center's foundations before the pages exist:
an action guarded like every real action, a page on base.html that follows live topics,
and a real Channels consumer speaking the live protocol (controlcenter/live.py).

`urlpatterns` is a URLconf (the project's routes plus these); `application()` is the
project's ASGI app with the probe consumer at /ws/live/, behind the same origin check the
real routing uses.
"""

from __future__ import annotations

from typing import Any

from channels.auth import AuthMiddlewareStack
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.layers import get_channel_layer
from channels.routing import ProtocolTypeRouter, URLRouter
from channels.security.websocket import AllowedHostsOriginValidator
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.template import Context, RequestContext, Template
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from controlcenter import live
from controlcenter.access import Capability, may_view, requires
from controlcenter.audit import aaudited, audited
from millrace.urls import urlpatterns as project_urlpatterns

PROBE_GROUP = "probe"

PAGE = Template("""{% extends "controlcenter/base.html" %}{% load millrace %}
{% block title %}Probe{% endblock %}{% block live_topics %}probe topic:a,b{% endblock %}
{% block content %}
<div class="page-header"><h1>Probe</h1></div>
<section class="card"><span id="live-probe">not connected yet</span>
  <ul id="probe-list"></ul></section>
<section class="card"><h2>Statuses</h2>
  {% for s in statuses %}{% status_badge s %} {% endfor %}
  <div style="margin-top:1rem;max-width:20rem">{% progress 42 100 "catch-up" %}</div></section>
<form method="post" action="{% url 'probe-touch' %}" class="card">{% csrf_token %}
  <input type="hidden" name="target" value="topic orders">
  <button type="submit" class="btn btn-primary" id="touch">Touch the topic</button>
</form>
{% endblock %}""")


def probe_page(request: HttpRequest) -> HttpResponse:
    statuses = ["OK", "WARN", "ERR", "STOP", "STALL", "REWIND"]
    return HttpResponse(PAGE.render(RequestContext(request, {"statuses": statuses})))


@requires(Capability.CHANGE_TOPICS)
def touch(request: HttpRequest) -> HttpResponse:
    """A state change as real actions make them: audited, then back to the page."""
    target = request.POST.get("target", "")
    try:
        with audited(request, "probe.touch", target, {"fail": "fail" in request.POST}) as note:
            if "fail" in request.POST:
                raise RuntimeError("INVALID_CONFIG: the broker refused")
            note.message = "touched"
    except RuntimeError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Touched {target}.")
    return redirect("probe-page")


@requires(Capability.CHANGE_TOPICS)
async def touch_async(request: HttpRequest) -> HttpResponse:
    async with aaudited(request, "probe.touch_async", "topic orders") as note:
        note.message = "touched"
    return JsonResponse({"ok": True})


@csrf_exempt
async def push(request: HttpRequest, kind: str) -> HttpResponse:
    """Lets a test make the server push: a banner, a list item, or a dropped connection."""
    layer = get_channel_layer()
    assert layer is not None
    await layer.group_send(PROBE_GROUP, {"type": f"probe.{kind}", "text": request.GET.get("text")})
    return HttpResponse("pushed")


urlpatterns = [
    *project_urlpatterns,
    path("probe/", probe_page, name="probe-page"),
    path("probe/touch/", touch, name="probe-touch"),
    path("probe/touch-async/", touch_async, name="probe-touch-async"),
    path("probe/push/<str:kind>/", push),
]


class ProbeConsumer(AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    """Follows the protocol: refuses who may not view (4401), sends the current fragment
    on every connect, relays pushes from the probe views."""

    connections = 0

    async def connect(self) -> None:
        if not may_view(self.scope["user"]):
            await self.close(code=4401)
            return
        self.topics = live.parse_topics(self.scope["query_string"])
        await self.accept()
        ProbeConsumer.connections += 1
        await self.channel_layer.group_add(PROBE_GROUP, self.channel_name)
        html = Template('<span id="live-probe">connection {{ n }}: {{ topics|join:" | " }}</span>')
        context = Context({"n": ProbeConsumer.connections, "topics": self.topics})
        await self.send_json(live.fragment("live-probe", html.render(context)))

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(PROBE_GROUP, self.channel_name)

    async def probe_banner(self, event: dict[str, Any]) -> None:
        text = event["text"]
        await self.send_json(live.banner("cluster", text or "", active=bool(text)))

    async def probe_item(self, event: dict[str, Any]) -> None:
        item = Template("<li>{{ text }}</li>").render(Context({"text": event["text"]}))
        await self.send_json(live.fragment("probe-list", item, swap="beforeend"))

    async def probe_drop(self, event: dict[str, Any]) -> None:
        await self.close(code=1012)  # "service restart": the client should come back


def application() -> Any:
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
    from django.core.asgi import get_asgi_application

    return ProtocolTypeRouter({
        "http": ASGIStaticFilesHandler(get_asgi_application()),
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter([path("ws/live/", ProbeConsumer.as_asgi())]))
        ),
    })  # fmt: skip
