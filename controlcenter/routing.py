"""Websocket routes (asgi.py wraps them in the origin check and the session's user)."""

from django.urls import path

from controlcenter.consumers import LiveConsumer

websocket_urlpatterns = [
    path("ws/live/", LiveConsumer.as_asgi()),
]
