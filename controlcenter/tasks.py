"""Celery tasks: thin, each calls one action (controlcenter/README.md, "Lag analytics").

The worker runs them in its `threads` pool: a run's task only waits on its Spark
subprocess, so the worker never forks after a JVM or Spark's threads exist.

Actions queue `run_analysis_task` by its name (`analysis/execute.py`, `RUN_ANALYSIS_TASK`):
this module imports actions, so actions never import it.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task
from celery.signals import worker_ready, worker_shutting_down

from controlcenter import actions
from controlcenter.analysis.execute import RUN_ANALYSIS_TASK
from controlcenter.streams import actions as streams_actions
from controlcenter.streams.supervise import RUN_STREAM_TASK, SHUTTING_DOWN


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


# --- stream queries (controlcenter/streams/supervise.py) ---------------------------------------
@shared_task(name=RUN_STREAM_TASK, ignore_result=True, bind=True)  # type: ignore[untyped-decorator]
def run_stream_query_task(self: Any, query_id: int) -> str:
    """Holds its worker thread for the query's life: the streams queue's worker has one
    thread per query it may run (MILLRACE_STREAMS_CONCURRENCY)."""
    return streams_actions.run_stream_query(query_id, worker=str(self.request.hostname or ""))


@shared_task(name="controlcenter.tasks.resume_stream_queries_task", ignore_result=True)  # type: ignore[untyped-decorator]
def resume_stream_queries_task() -> int:
    return len(streams_actions.resume_stream_queries())


@worker_ready.connect  # type: ignore[untyped-decorator]
def resume_stream_queries(sender: Any = None, **kwargs: Any) -> None:
    """After a platform restart the queries that were running resume at once (from their
    checkpoints), not at beat's next round. Any worker may ask: a query's task claims it, so
    a second task for it ends at once."""
    streams_actions.resume_stream_queries(str(getattr(sender, "hostname", "") or ""))


@worker_shutting_down.connect  # type: ignore[untyped-decorator]
def release_stream_queries(**kwargs: Any) -> None:
    """Warm shutdown waits for running tasks: the stream tasks end their drivers and return."""
    SHUTTING_DOWN.set()
