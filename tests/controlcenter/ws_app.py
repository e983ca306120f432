"""The platform's ASGI application plus a trivial websocket route, for test_webserver.py.

The control center's own websockets come with its pages; this proves the server and its
workers carry Channels websockets through `ProtocolTypeRouter` meanwhile.
"""

import os

from channels.generic.websocket import AsyncWebsocketConsumer
from channels.routing import ProtocolTypeRouter, URLRouter
from django.urls import path

from millrace.asgi import application as platform


class Echo(AsyncWebsocketConsumer):  # type: ignore[misc]
    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        await self.send(text_data=f"{os.getpid()} {text_data}")


application = ProtocolTypeRouter({
    "http": platform.application_mapping["http"],
    "websocket": URLRouter([path("ws/echo", Echo.as_asgi())]),
})
