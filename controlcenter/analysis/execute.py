"""One analysis run, from QUEUED to its end, inside the Celery task that runs it.

`queue_analysis` sends the run's task (`tasks.run_analysis_task`, by name) to the worker;
actions call it once a launched run's row is committed.

Every status change is a conditional UPDATE on the run's row (`_move`), so a cancel and a
start, or a cancel and a success, never both win: whichever UPDATE matches first decides,
the other matches no row. The result is written by the same UPDATE that says SUCCEEDED, so
a run holds a complete result or none.

Each change is pushed to browsers: the run's page (`analysis.<id>`) and the runs list
(`analyses`), as server-rendered fragments (the same templates the pages include).
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
from pathlib import Path
from typing import Any

from celery import current_app as app
from django.conf import settings
from django.template.loader import render_to_string
from django.utils import timezone

from clusterclient.clusters import by_name
from controlcenter import clusters, events
from controlcenter.analysis import runner
from controlcenter.models import AnalysisRun, AnalysisStatus

log = logging.getLogger(__name__)


# The Celery task that runs one analysis (a thin task in `controlcenter/tasks.py`, calling
# `actions.run_analysis`). Queued by name: tasks import actions, so actions, and this module
# they call, must not import tasks.
RUN_ANALYSIS_TASK = "controlcenter.tasks.run_analysis_task"


def queue_analysis(run_id: int) -> None:
    """Send the run's task to the broker the settings name NOW (filesystem or Redis), not
    the one the Celery app was configured with at import. The app is the project's
    (`celery.current_app`: the app never imports the project)."""
    url = settings.CELERY_BROKER_URL
    # Named either way: without one, Celery falls back to the transport of its settings.
    scheme = url.partition("://")[0]
    transport = settings.MILLRACE_FILE_QUEUE_TRANSPORT if scheme == "filesystem" else scheme
    with app.connection_for_write(
        url, transport=transport, transport_options=settings.CELERY_BROKER_TRANSPORT_OPTIONS
    ) as conn:
        app.send_task(RUN_ANALYSIS_TASK, (run_id,), connection=conn,
                      queue=settings.MILLRACE_ANALYSIS_QUEUE)


def run_analysis(run_id: int, worker: str = "") -> str:
    """Run a QUEUED run to its end in the Celery worker named `worker`; returns its final
    status (or why nothing ran). A run whose cluster is no longer configured (queued before
    the platform restarted with fewer clusters) ends FAILED without starting a job."""
    master = settings.SPARK_MASTER_URL
    run = AnalysisRun.objects.filter(pk=run_id).first()
    if run is not None and by_name(clusters.configured(), run.cluster) is None:
        return _refuse(run, clusters.UnknownCluster(run.cluster))
    if not _move(run_id, AnalysisStatus.QUEUED, AnalysisStatus.RUNNING,
                 started_at=timezone.now(), master=master, worker=worker):  # fmt: skip
        current = AnalysisRun.objects.filter(pk=run_id).values_list("status", flat=True).first()
        log.info("analysis %s not started: it is %s", run_id, current or "gone")
        return str(current or "missing")
    run = AnalysisRun.objects.get(pk=run_id)
    publish_run(run)
    scratch = settings.MILLRACE_ANALYSIS_DIR / str(run_id)
    shutil.rmtree(scratch, ignore_errors=True)
    try:
        command = job_command(run, scratch / "result.json", master)
        outcome = runner.run_job(command, lambda p: _progress(run, p),
                                 lambda: _cancel_requested(run_id))
    except Exception as exc:  # the job could not even start: still an ending, never RUNNING
        log.exception("analysis %s could not run", run_id)
        outcome = runner.Outcome(runner.Ending.FAILED, error=f"{type(exc).__name__}: {exc}")
    status = _finish(run_id, outcome)
    if outcome.ending is not runner.Ending.FAILED:
        shutil.rmtree(scratch, ignore_errors=True)  # a failure keeps spark.log to read
    publish_run(AnalysisRun.objects.get(pk=run_id))
    return status


def job_command(run: AnalysisRun, out: Path, master: str) -> runner.JobCommand:
    """The Spark job of `run`: its parameters, and the bootstrap servers and client config
    (a login) of the cluster it was launched for; UnknownCluster when that cluster is no
    longer configured (never the default in its place)."""
    cluster = by_name(clusters.configured(), run.cluster)
    if cluster is None:
        raise clusters.UnknownCluster(run.cluster)
    params = {**run.parameters, "bootstrap": cluster.bootstrap_servers,
              **({"kafka_config": dict(cluster.config)} if cluster.config else {})}
    return runner.JobCommand(job=run.job, params=params, out=out, master=master,
                             tag=f"millrace-analysis-{run.pk}")


def _refuse(run: AnalysisRun, reason: clusters.UnknownCluster) -> str:
    """A queued run that must not run: FAILED, saying why."""
    if _move(run.pk, AnalysisStatus.QUEUED, AnalysisStatus.FAILED, finished_at=timezone.now(),
             error=f"Not run: {reason}"):
        log.warning("analysis %s not run: %s", run.pk, reason)
        publish_run(AnalysisRun.objects.get(pk=run.pk))
    return str(AnalysisRun.objects.values_list("status", flat=True).get(pk=run.pk))


def _finish(run_id: int, outcome: runner.Outcome) -> str:
    """The run's ending. A cancel requested before this UPDATE wins over the job's own
    ending (the UPDATE requires no cancel request), so a cancelled run never gets a result."""
    now = timezone.now()
    running = AnalysisRun.objects.filter(pk=run_id, status=AnalysisStatus.RUNNING)
    if outcome.ending is runner.Ending.DONE:
        running.filter(cancel_requested=False).update(
            status=AnalysisStatus.SUCCEEDED, finished_at=now, result=outcome.result)
    elif outcome.ending is runner.Ending.FAILED:
        running.filter(cancel_requested=False).update(
            status=AnalysisStatus.FAILED, finished_at=now, error=outcome.error)
    running.update(status=AnalysisStatus.CANCELLED, finished_at=now)
    return str(AnalysisRun.objects.values_list("status", flat=True).get(pk=run_id))


def fail_orphans(worker: str) -> int:
    """Runs a previous life of `worker` left RUNNING (killed mid-job: its jobs died with it,
    PR_SET_PDEATHSIG) end FAILED, saying so; called when the worker is ready again."""
    orphans = list(AnalysisRun.objects.filter(status=AnalysisStatus.RUNNING, worker=worker))
    for run in orphans:
        if _move(run.pk, AnalysisStatus.RUNNING, AnalysisStatus.FAILED, finished_at=timezone.now(),
                 error=f"The Celery worker {worker} stopped while running this job."):
            publish_run(AnalysisRun.objects.get(pk=run.pk))
    return len(orphans)


def cancel(run: AnalysisRun) -> str:
    """Ask a run to stop. A QUEUED run ends CANCELLED now (its task will find it so); a
    RUNNING one gets the flag its task polls, and ends CANCELLED when its job has stopped.
    Returns the status the run has after the request."""
    if _move(run.pk, AnalysisStatus.QUEUED, AnalysisStatus.CANCELLED,
             finished_at=timezone.now(), cancel_requested=True):  # fmt: skip
        run.refresh_from_db()
        publish_run(run)
        return AnalysisStatus.CANCELLED
    AnalysisRun.objects.filter(pk=run.pk, status=AnalysisStatus.RUNNING).update(
        cancel_requested=True)
    run.refresh_from_db()
    publish_run(run)
    return run.status


def _move(run_id: int, source: AnalysisStatus, target: AnalysisStatus, **fields: Any) -> bool:
    return bool(AnalysisRun.objects.filter(pk=run_id, status=source)
                .update(status=target, **fields))


def _cancel_requested(run_id: int) -> bool:
    return AnalysisRun.objects.filter(pk=run_id, cancel_requested=True).exists()


def _progress(run: AnalysisRun, progress: runner.Progress) -> None:
    fields = dataclasses.asdict(progress)
    AnalysisRun.objects.filter(pk=run.pk, status=AnalysisStatus.RUNNING).update(**fields)
    for name, value in fields.items():
        setattr(run, name, value)
    publish_run(run)


# --- live pushes ------------------------------------------------------------------------------

STATUS_TEMPLATE = "controlcenter/fragments/analysis_status.html"
ROW_TEMPLATE = "controlcenter/fragments/analysis_row.html"


def status_element_id(run: AnalysisRun) -> str:
    return f"analysis-status-{run.pk}"


def row_element_id(run: AnalysisRun) -> str:
    return f"analysis-row-{run.pk}"


def publish_run(run: AnalysisRun) -> None:
    """Push the run's status (its page) and its row (the runs list) to open pages."""
    context = {"run": run}
    try:
        events.publish(events.group_name("analysis", run.pk), events.fragment_message(
            status_element_id(run), render_to_string(STATUS_TEMPLATE, context)))
        events.publish(events.group_name("analyses"), events.fragment_message(
            row_element_id(run), render_to_string(ROW_TEMPLATE, context)))
    except Exception:  # a push is a courtesy: the run's row is the truth
        log.warning("could not publish analysis %s", run.pk, exc_info=True)
