"""The Millrace project: settings, the ASGI application, the web server, Celery and the
`platform` command that runs it all (millrace/README.md). The apps never import it."""

from .celery import app as celery_app

__all__ = ("celery_app",)
