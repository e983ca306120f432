"""The Celery app; configuration comes from Django settings under the CELERY_ namespace."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "millrace.settings")

app = Celery("millrace")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# The default for every thread, so the apps reach it as `celery.current_app` without
# importing the project (a request's thread would otherwise get Celery's fallback app).
app.set_default()
