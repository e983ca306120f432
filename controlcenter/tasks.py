"""Celery tasks: thin, each calls one action (controlcenter/README.md, "Lag analytics").

The worker runs them in its `threads` pool: a run's task only waits on its Spark
subprocess, so the worker never forks after a JVM or Spark's threads exist.

The task that runs one analysis, `run_analysis_task`, is declared beside what it runs and
how it is queued (`analysis/execute.py`): actions queue it, and this module imports actions.
It is named here so that the worker, which imports this module, registers it.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task
from celery.signals import worker_ready

from controlcenter import actions
from controlcenter.analysis.execute import run_analysis_task

__all__ = ["fail_orphaned_analyses", "launch_due_analyses_task", "run_analysis_task"]


@worker_ready.connect  # type: ignore[untyped-decorator]
def fail_orphaned_analyses(sender: Any = None, **kwargs: Any) -> None:
    """A worker that was killed mid-run left its runs RUNNING; now that it is back, they
    end FAILED (its jobs died with it)."""
    actions.fail_orphaned_analyses(str(getattr(sender, "hostname", "") or ""))


@shared_task(name="controlcenter.tasks.launch_due_analyses_task", ignore_result=True)  # type: ignore[untyped-decorator]
def launch_due_analyses_task() -> int:
    return len(actions.launch_due_analyses())
