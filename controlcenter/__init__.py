"""The Millrace control center: the Django project and its dashboards."""

from .celery import app as celery_app

__all__ = ("celery_app",)
