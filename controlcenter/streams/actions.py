"""Every change to stream queries, verb first (the streams' part of `controlcenter.actions`):
validate and create, stop, restart, delete, run an ad-hoc query. Each writes the audit log,
changes the row by a conditional UPDATE, queues the query's task once the row is committed,
and publishes the change to open pages."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from clusterclient import ClusterRequestError, ClusterUnavailable
from controlcenter import connection
from controlcenter.actions import ActionError
from controlcenter.audit import Actor, audited
from controlcenter.streams import publish, sql, supervise
from controlcenter.streams.models import (
    ACTIVE,
    LagAlert,
    OutputMode,
    QueryKind,
    StreamQuery,
    StreamState,
    ValueFormat,
)
from controlcenter.streams.views import QueryError
from laganalysis import lagbaseline, records

_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


@dataclass(frozen=True)
class QuerySpec:
    name: str
    sql: str
    output_topic: str
    key_column: str = ""
    value_format: str = ValueFormat.JSON
    output_mode: str = OutputMode.APPEND
    kind: str = QueryKind.SQL
    params: dict[str, Any] = field(default_factory=dict)  # a built-in kind's settings


def check_query(spec: QuerySpec) -> sql.Checked:
    """The spec's SQL as Spark would start it; ActionError INVALID_QUERY in Spark's words."""
    if not _TOPIC.match(spec.output_topic) or spec.output_topic in (".", ".."):
        raise ActionError(f"Invalid output topic name {spec.output_topic!r}.", "INVALID_TOPIC")
    try:
        return sql.validate(spec.sql, spec.output_mode, spec.key_column, spec.value_format)
    except QueryError as exc:
        raise ActionError(str(exc), "INVALID_QUERY") from exc


def lag_anomaly_spec(name: str = "lag-anomalies", params: dict[str, Any] | None = None,
                     output_topic: str = records.LAG_ALERTS_TOPIC) -> QuerySpec:
    """The built-in lag-anomaly query: `_millrace-lag-samples` judged against each
    (group, topic)'s rolling baseline (laganalysis/lagbaseline.py), alerts into
    `output_topic` (`_millrace-lag-alerts`), which its task reads into the groups' pages."""
    return QuerySpec(name, "", output_topic or records.LAG_ALERTS_TOPIC, "key",
                     ValueFormat.RAW, OutputMode.APPEND, QueryKind.LAG_ANOMALY,
                     dict(params or {}))


def check_lag_anomaly(spec: QuerySpec) -> sql.Checked:
    """The rule's parameters in range, the samples topic there (the collector creates it),
    and the alerts topic made when missing."""
    if not _TOPIC.match(spec.output_topic) or spec.output_topic in (".", ".."):
        raise ActionError(f"Invalid output topic name {spec.output_topic!r}.", "INVALID_TOPIC")
    try:
        lagbaseline.Rule.parse(spec.params)
    except lagbaseline.RuleError as exc:
        raise ActionError(f"Invalid lag-anomaly rule: {exc}.", "INVALID_QUERY") from exc
    try:
        cluster = connection.cluster()
        topics = cluster.metadata(refresh=True).topics
        if records.LAG_SAMPLES_TOPIC not in topics:
            raise ActionError(f"No lag history yet: {records.LAG_SAMPLES_TOPIC} is missing "
                              "(the collector creates it on its first cycle).", "INVALID_QUERY")
        if spec.output_topic not in topics:
            partitions, configs = records.LAG_ALERTS_SETTINGS
            cluster.create_topic(spec.output_topic, partitions, -1, configs)
    except ClusterRequestError as exc:
        if exc.code_name != "TOPIC_ALREADY_EXISTS":
            raise ActionError(f"Cannot create {spec.output_topic}: {exc}", "INVALID_TOPIC") from exc
    except ClusterUnavailable as exc:
        raise ActionError(f"The cluster is not answering: {exc}", "CLUSTER_UNAVAILABLE") from exc
    return sql.Checked([records.LAG_SAMPLES_TOPIC], ["key", "value"])


def create_stream_query(actor: Actor, spec: QuerySpec) -> StreamQuery:
    """Validate, record the query QUEUED and queue its task once the row is committed."""
    with audited(actor, "stream.create", f"stream query {spec.name}",
                 {"kind": spec.kind, "sql": spec.sql, "params": spec.params,
                  "output_topic": spec.output_topic}) as note:
        if spec.kind == QueryKind.LAG_ANOMALY:
            checked = check_lag_anomaly(spec)
        elif not spec.sql.strip():
            raise ActionError("A SQL query needs its SQL.", "INVALID_QUERY")
        else:
            checked = check_query(spec)
        if spec.output_topic in checked.topics:
            raise ActionError("The output topic is one the query reads: it would read its own "
                              "output.", "INVALID_QUERY")
        try:
            with transaction.atomic():
                query = StreamQuery.objects.create(
                    name=spec.name, kind=spec.kind, params=spec.params, sql=spec.sql,
                    source_topics=checked.topics,
                    output_topic=spec.output_topic, key_column=spec.key_column,
                    value_format=spec.value_format, output_mode=spec.output_mode,
                    checkpoint=str(supervise.checkpoint_dir(spec.name)),
                    created_by=_user(actor))
        except IntegrityError as exc:
            raise ActionError(f"A stream query named {spec.name} exists.",
                              "QUERY_EXISTS") from exc
        supervise.remove_files(query.checkpoint)  # a deleted namesake's leftovers
        transaction.on_commit(lambda: supervise.queue_query(query.pk))
        note.message = f"reads {', '.join(checked.topics)}; queued"
    publish.query_changed(query.pk)
    return query


def stop_stream_query(actor: Actor, query: StreamQuery) -> StreamQuery:
    """A running query stops between batches (its task ends the driver); a queued or
    restarting one stops now."""
    with audited(actor, "stream.stop", f"stream query {query.name}"):
        if not query.active:
            raise ActionError(f"Stream query {query.name} is {query.state}.", "QUERY_NOT_RUNNING")
        StreamQuery.objects.filter(pk=query.pk, state__in=ACTIVE).update(stop_requested=True)
        # No live task holds it (queued, or its worker is gone): stopped at once.
        StreamQuery.objects.filter(pk=query.pk, state__in=ACTIVE, task_token="").update(
            state=StreamState.STOPPED, stop_requested=False)
    return _changed(query)


def restart_stream_query(actor: Actor, query: StreamQuery) -> StreamQuery:
    """A stopped or failed query is queued again (resuming from its checkpoint); a running
    one is stopped and started again by its task."""
    with audited(actor, "stream.restart", f"stream query {query.name}"):
        if query.active and query.task_token:
            StreamQuery.objects.filter(pk=query.pk).update(restart_requested=True)
        else:
            StreamQuery.objects.filter(pk=query.pk).update(
                state=StreamState.QUEUED, stop_requested=False, restart_requested=False,
                restarts=0, last_error="", heartbeat_at=None, task_token="")
            transaction.on_commit(lambda: supervise.queue_query(query.pk))
    return _changed(query)


def delete_stream_query(actor: Actor, query: StreamQuery) -> None:
    """Delete the query and its checkpoint; a running task sees the row gone, ends the
    driver and removes the checkpoint itself."""
    with audited(actor, "stream.delete", f"stream query {query.name}"):
        StreamQuery.objects.filter(pk=query.pk).delete()
        if not query.task_token:
            supervise.remove_files(query.checkpoint)
    publish.query_changed(query.pk)


def run_adhoc_query(actor: Actor, text: str, limit: int, timeout_s: float) -> sql.Rows:
    """A bounded batch query (not a change, but it costs the cluster reads: audited)."""
    with audited(actor, "stream.adhoc", "ad-hoc query", {"sql": text, "limit": limit}) as note:
        try:
            rows = sql.run_adhoc(text, limit, timeout_s)
        except QueryError as exc:
            raise ActionError(str(exc), "INVALID_QUERY") from exc
        note.message = f"{len(rows.rows)} rows"
    return rows


def record_lag_alerts(query: StreamQuery, topic: str,
                      read: Sequence[tuple[records.LagAlertRecord, int, int]]) -> int:
    """Store alerts read from a lag-anomaly query's topic ((record, partition, offset)), each
    record once, and push each group's alerts to its open pages."""
    rows = [LagAlert(group_id=r.group, topic=r.topic, state=r.state, lag=r.lag, mean=r.mean,
                     stddev=r.stddev, threshold=r.threshold, query_id=query.pk,
                     ts=dt.datetime.fromtimestamp(r.timestamp_ms / 1000, dt.UTC),
                     source_topic=topic, source_partition=partition, source_offset=offset)
            for r, partition, offset in read]
    LagAlert.objects.bulk_create(rows, ignore_conflicts=True)
    for group in dict.fromkeys(r.group for r, _, _ in read):
        publish.group_alerts(group)
    return len(rows)


def resume_stream_queries(worker: str = "") -> list[int]:
    """The supervisor's round (Celery beat; `worker` when that worker got ready):
    supervise.resume_queries."""
    return supervise.resume_queries(worker)


def run_stream_query(query_id: int, worker: str = "") -> str:
    """The query's task body (supervise.run_query)."""
    return supervise.run_query(query_id, worker)


def _changed(query: StreamQuery) -> StreamQuery:
    query.refresh_from_db()
    publish.query_changed(query.pk)
    return query


def _user(actor: Actor) -> User | None:
    user = getattr(actor, "user", actor)
    return user if isinstance(user, User) and user.is_authenticated else None
