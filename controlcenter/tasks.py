"""Celery tasks: thin, each calls one action (controlcenter/README.md, "Lag analytics").

The worker runs them in its `threads` pool: a run's task only waits on its Spark
subprocess, so the worker never forks after a JVM or Spark's threads exist.

Actions queue `run_analysis_task` by its name (`analysis/execute.py`, `RUN_ANALYSIS_TASK`):
this module imports actions, so actions never import it.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task
from celery.signals import worker_ready

from controlcenter import actions
from controlcenter.analysis.execute import RUN_ANALYSIS_TASK


@shared_task(name=RUN_ANALYSIS_TASK, ignore_result=True, bind=True)  # type: ignore[untyped-decorator]  # celery is untyped
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
