"""Celery tasks: thin, each calls one action (controlcenter/README.md, "Lag analytics").

The worker runs them in its `threads` pool: a run's task only waits on its Spark
subprocess, so the worker never forks after a JVM or Spark's threads exist.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings

from controlcenter import actions


@shared_task(name="controlcenter.tasks.run_analysis_task", ignore_result=True, bind=True)  # type: ignore[untyped-decorator]  # celery is untyped
def run_analysis_task(self: Any, run_id: int) -> str:
    return actions.run_analysis(run_id, worker=str(self.request.hostname or ""))


@worker_ready.connect  # type: ignore[untyped-decorator]
def fail_orphaned_analyses(sender: Any = None, **kwargs: Any) -> None:
    """A worker that was killed mid-run left its runs RUNNING; now that it is back, they
    end FAILED (its jobs died with it)."""
    actions.fail_orphaned_analyses(str(getattr(sender, "hostname", "") or ""))


@shared_task(name="controlcenter.tasks.launch_due_analyses_task", ignore_result=True)  # type: ignore[untyped-decorator]
def launch_due_analyses_task() -> int:
    return len(actions.launch_due_analyses())


def queue_analysis(run_id: int) -> None:
    """Send the run's task to the broker the settings name NOW (filesystem or Redis), not
    the one the Celery app was configured with at import."""
    from controlcenter.celery import app

    url = settings.CELERY_BROKER_URL
    # Named either way: without one, Celery falls back to the transport of its settings.
    scheme = url.partition("://")[0]
    transport = settings.MILLRACE_FILE_QUEUE_TRANSPORT if scheme == "filesystem" else scheme
    with app.connection_for_write(
        url, transport=transport, transport_options=settings.CELERY_BROKER_TRANSPORT_OPTIONS
    ) as conn:
        run_analysis_task.apply_async((run_id,), connection=conn,
                                      queue=settings.MILLRACE_ANALYSIS_QUEUE)
