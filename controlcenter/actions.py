"""Every state change the control center makes, as verb-first functions.

Each action checks nothing about HTTP (views, the JSON API and tasks check permissions and
parse input, then call it), performs the change through clusterclient, the built-in
cluster's supervisor client or the registry app, records an `AuditEntry` (who, what, when,
result) and then publishes an event so open pages show what happened. A refusal or a fault
raises `ActionError` carrying the system's own words (the Kafka error name and message,
the supervisor's refusal), which the caller shows as a form error.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple
from urllib.parse import quote

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone

from brokercluster.client import ActionRefused, BrokerProcess, NoSupervisor
from clusterclient import (
    AcksAllShortfall,
    ClusterClient,
    ClusterRequestError,
    ClusterUnavailable,
    ConfigChange,
    ConfigOperation,
    ResourceKind,
)
from clusterclient.elections import elect_preferred_leaders as elect
from clusterclient.metadata import TopicPartition
from clusterclient.records import ProducedRecord, produce
from controlcenter import clusters, connectapi, connection, events, live, offsetreset
from controlcenter.analysis import execute
from controlcenter.analysis import jobs as analysis_jobs
from controlcenter.analysis.schedules import ScheduleSpec
from controlcenter.audit import Actor, audited, record
from controlcenter.models import AnalysisRun, AnalysisSchedule, AnalysisStatus
from registry import actions as registry_actions
from registry import compatibility as registry_compatibility
from registry import errors as registry_errors
from registry import lookups as registry_lookups
from registry.errors import RegistryError

logger = logging.getLogger(__name__)


class ActionError(Exception):
    """An action did not happen; `str()` is what the user reads."""

    def __init__(self, message: str, code_name: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code_name = code_name


@contextmanager
def _system_words() -> Iterator[None]:
    """The cluster's and supervisor's exceptions as ActionError, in their own words."""
    try:
        yield
    except ClusterRequestError as exc:
        raise ActionError(f"{exc.code_name}: {exc.message}", exc.code_name) from exc
    except ClusterUnavailable as exc:
        raise ActionError(f"The cluster did not answer: {exc.message}", "UNAVAILABLE") from exc
    except NoSupervisor as exc:
        raise ActionError(f"No cluster supervisor answers: {exc}", "NO_SUPERVISOR") from exc
    except ActionRefused as exc:
        raise ActionError(f"The supervisor refused: {exc}", "REFUSED") from exc
    except OSError as exc:
        raise ActionError(f"The supervisor did not answer: {exc}", "UNAVAILABLE") from exc


def _notify(groups: Sequence[tuple[str, str | None]], text: str) -> None:
    """Tell open pages what was done; the collector's next cycle pushes its effect."""
    message = json.dumps(live.banner("action", text, level="info"))
    for kind, key in groups:
        try:
            events.publish(events.group_name(kind, key), message)
        except Exception:  # a live push is a courtesy: the change itself is done
            logger.warning("could not publish %r to %s.%s", text, kind, key, exc_info=True)


# --- Cluster pages: topics, messages, brokers ------------------------------------------------


def create_topic(actor: Actor, name: str, partitions: int | None = None,
                 replication_factor: int | None = None,
                 configs: Mapping[str, str] | None = None) -> AcksAllShortfall | None:
    """Create a topic; None takes the broker's num.partitions / default.replication.factor.
    Returns the topic's acks=all shortfall (replicas below its min.insync.replicas), which
    Kafka accepts but every acks=all writer then meets, for the caller to warn about."""
    parameters = {"partitions": partitions, "replication_factor": replication_factor,
                  "configs": dict(configs or {})}
    with audited(actor, "topic.create", f"topic {name}", parameters) as note, _system_words():
        cluster = connection.cluster()
        cluster.create_topic(name, partitions or -1, replication_factor or -1, configs)
        note.message = "created"
        shortfall = _acks_all_shortfall(cluster, name)
        if shortfall is not None:
            note.message += f"; warned: {shortfall.message}"
    _notify([("topics", None), ("overview", None)], f"Topic {name} was created.")
    return shortfall


def _acks_all_shortfall(cluster: ClusterClient, topic: str) -> AcksAllShortfall | None:
    try:
        return cluster.acks_all_shortfall(topic)
    except (ClusterRequestError, ClusterUnavailable) as exc:  # the topic exists: say so
        logger.warning("topic %s created, but its min.insync.replicas could not be read: %s",
                       topic, exc)
        return None


def delete_topic(actor: Actor, name: str) -> None:
    with audited(actor, "topic.delete", f"topic {name}") as note, _system_words():
        connection.cluster().delete_topic(name)
        note.message = "deleted"
    _notify([("topics", None), ("topic", name), ("overview", None)],
            f"Topic {name} was deleted.")


def set_topic_config(actor: Actor, topic: str, name: str, value: str) -> None:
    """Set one topic config (IncrementalAlterConfigs SET): the broker validates it."""
    with audited(actor, "topic.config.set", f"topic {topic}", {name: value}) as note, \
            _system_words():
        connection.cluster().incremental_alter_configs(
            ResourceKind.TOPIC, topic, [ConfigChange(name, value, ConfigOperation.SET)])
        note.message = f"{name} = {value}"
    _notify([("topic", topic)], f"{topic}: {name} set to {value}.")


def reset_topic_config(actor: Actor, topic: str, name: str) -> None:
    """Remove a topic override (IncrementalAlterConfigs DELETE): back to the broker default."""
    with audited(actor, "topic.config.reset", f"topic {topic}", {"config": name}) as note, \
            _system_words():
        connection.cluster().incremental_alter_configs(
            ResourceKind.TOPIC, topic, [ConfigChange(name, None, ConfigOperation.DELETE)])
        note.message = f"{name} reset to its default"
    _notify([("topic", topic)], f"{topic}: {name} reset to its default.")


def produce_message(actor: Actor, topic: str, value: bytes | None, key: bytes | None = None,
                    headers: Sequence[tuple[str, bytes]] = (), partition: int | None = None,
                    schema_id: int | None = None) -> ProducedRecord:
    """Produce one record (acks=all). The audit entry names where it went, not its bytes."""
    parameters = {"partition": partition, "headers": [k for k, _ in headers],
                  "bytes": len(value or b""), "schema_id": schema_id}
    with audited(actor, "topic.produce", f"topic {topic}", parameters) as note, \
            _system_words():
        produced = produce(connection.bootstrap_servers(), topic, value, key, list(headers),
                           partition, timeout=connection.TIMEOUT,
                           config=connection.client_config())
        note.message = f"partition {produced.partition} offset {produced.offset}"
    return produced


class BrokerCommand(enum.StrEnum):
    """What the Brokers page may ask the built-in cluster's supervisor to do."""

    STOP = "stop"  # SIGTERM: a controlled shutdown
    KILL = "kill"  # SIGKILL: a crash, as a failover drill
    START = "start"
    RESTART = "restart"


def operate_broker(actor: Actor, node_id: int, command: BrokerCommand) -> BrokerProcess:
    """Stop, kill, start or restart one broker of the built-in cluster."""
    supervisor = connection.supervisor()
    with audited(actor, f"broker.{command.value}", f"broker {node_id}") as note, \
            _system_words():
        if supervisor is None:
            raise NoSupervisor("the platform watches an external cluster")
        process = getattr(supervisor, command.value)(node_id)
        note.message = process.state_text
    _notify([("brokers", None), ("broker", str(node_id)), ("overview", None)],
            f"Broker {node_id}: {command.value} done, now {process.state_text}.")
    return process  # type: ignore[no-any-return]


def elect_preferred_leaders(actor: Actor, topic: str | None = None) -> int:
    """Give every partition of `topic` (None: of the cluster) its preferred leader back;
    returns how many partitions the cluster could not move (e.g. its preferred replica is
    down or out of the ISR), which is not a failure of the request."""
    target = f"topic {topic}" if topic else "cluster"
    with audited(actor, "partitions.elect_preferred", target) as note, _system_words():
        cluster = connection.cluster()
        partitions = None if topic is None else [
            TopicPartition(topic, p.partition) for p in cluster.topic(topic).partitions]
        outcome = elect(cluster, partitions)
        refused = [tp for tp, problem in outcome.items() if problem is not None]
        note.message = f"{len(outcome) - len(refused)} of {len(outcome)} led by their " \
                       f"preferred replica"
    groups: list[tuple[str, str | None]] = [("brokers", None), ("overview", None)]
    _notify(groups + ([("topic", topic)] if topic else []),
            f"Preferred leader election on the {target}: {note.message}.")
    return len(refused)


# --- Consumer groups: reset offsets, delete ---------------------------------------------------


@contextmanager
def _reset_words() -> Iterator[None]:
    """A reset that cannot be planned, in kafka-consumer-groups' terms; then the cluster's."""
    try:
        with _system_words():
            yield
    except offsetreset.ResetError as exc:
        raise ActionError(str(exc), "INVALID_RESET") from exc


def preview_group_offsets_reset(group_id: str, spec: offsetreset.ResetSpec
                                ) -> offsetreset.ResetPlan:
    """The dry run: what `reset_group_offsets` would commit now. Changes nothing."""
    with _reset_words():
        return offsetreset.plan_reset(connection.cluster(), group_id, spec)


def reset_group_offsets(actor: Actor, group_id: str, spec: offsetreset.ResetSpec
                        ) -> offsetreset.ResetPlan:
    """Commit the planned offsets; refused while the group has active members (Kafka's
    rule: only Empty or Dead groups), as the broker would refuse it too."""
    with audited(actor, "group.reset_offsets", f"group {group_id}", spec.describe()) as note, \
            _reset_words():
        plan = offsetreset.plan_reset(connection.cluster(), group_id, spec)
        if not plan.may_execute:
            raise ActionError(plan.refusal, "GROUP_NOT_EMPTY")
        connection.cluster().alter_group_offsets(group_id, plan.targets())
        moved = sum(abs(p.moved or 0) for p in plan.partitions)
        note.message = f"{len(plan.partitions)} partitions reset, {moved} messages moved"
    _notify([("groups", None), ("group", group_id)],
            f"Group {group_id}: offsets reset ({spec.mode.value}) on "
            f"{len(plan.partitions)} partitions.")
    return plan


def delete_group(actor: Actor, group_id: str) -> None:
    """Delete a group and its committed offsets; Kafka refuses while it has members
    (NON_EMPTY_GROUP)."""
    with audited(actor, "group.delete", f"group {group_id}") as note, _system_words():
        connection.cluster().delete_groups([group_id])
        note.message = "deleted"
    _notify([("groups", None), ("group", group_id), ("overview", None)],
            f"Group {group_id} was deleted.")


# --- Schemas: register, compatibility, through the registry app -------------------------------


class RegisteredSchema(NamedTuple):
    schema_id: int
    version: int


class SchemaText(NamedTuple):
    """A schema as a person or an API client gives it: Confluent's `schemaType` names."""

    schema: str
    schema_type: str = "AVRO"
    references: Sequence[Mapping[str, Any]] = ()

    def request(self) -> registry_actions.SchemaRequest:
        """The registry's request; 42201 for a schema type it does not know."""
        return registry_actions.SchemaRequest.from_body({
            "schema": self.schema, "schemaType": self.schema_type,
            "references": list(self.references)})


def _schema_text(schema: SchemaText | str) -> SchemaText:
    return schema if isinstance(schema, SchemaText) else SchemaText(schema)



@contextmanager
def _registry_words() -> Iterator[None]:
    """The registry's refusals as ActionError, with Confluent's error_code and message."""
    try:
        yield
    except RegistryError as exc:
        raise ActionError(f"{exc.message} (error_code {exc.error_code})",
                          str(exc.error_code)) from exc


def check_schema_compatibility(subject: str, schema: SchemaText | str) -> list[str]:
    """Why `schema` may not be registered under `subject` ([]: it may). Changes nothing."""
    with _registry_words():
        request = _schema_text(schema).request()
        parsed, _ = request.parse(registry_lookups.normalize_configured(subject))
        return registry_lookups.compatibility_messages(subject, parsed,
                                                       schema_type=request.schema_type)


def register_schema_version(actor: Actor, subject: str,
                            schema: SchemaText | str) -> RegisteredSchema:
    """Test `schema` (Avro, JSON Schema or Protobuf) against the subject's level, then
    register it (the registry tests again under the subject's lock, so a concurrent change
    cannot slip through)."""
    text = _schema_text(schema)
    parameters = {"schema_type": text.schema_type}
    with audited(actor, "schema.register", f"subject {subject}", parameters) as note, \
            _registry_words():
        problems = check_schema_compatibility(subject, text)
        if problems:
            raise registry_errors.incompatible_schema(subject, problems)
        schema_id = registry_actions.register_schema(subject, text.request(), normalize=False)
        version = next(v.version for v in registry_lookups.subject_versions(subject)
                       if v.schema_id == schema_id)
        note.message = f"schema id {schema_id}, version {version}"
        note.parameters = {**parameters, "schema_id": schema_id, "version": version}
    _notify([("schemas", None), ("subject", subject)],
            f"Subject {subject}: version {version} (schema id {schema_id}) registered.")
    return RegisteredSchema(schema_id, version)


def set_schema_compatibility(actor: Actor, subject: str | None, level: str) -> None:
    """Set the compatibility level of one subject, or the global one (subject None)."""
    target = f"subject {subject}" if subject else "global compatibility"
    with audited(actor, "schema.compatibility.set", target, {"level": level}) as note, \
            _registry_words():
        if level not in registry_compatibility.Level.__members__:
            raise registry_errors.invalid_compatibility_level()
        registry_actions.set_compatibility(subject, level, None)
        note.message = f"compatibility {level}"
    _notify([("schemas", None), *([("subject", subject)] if subject else [])],
            f"{'Subject ' + subject if subject else 'Global'} compatibility set to {level}.")


def clear_schema_compatibility(actor: Actor, subject: str) -> str:
    """Remove a subject's own level, so the global one applies; returns the level it had."""
    with audited(actor, "schema.compatibility.clear", f"subject {subject}") as note, \
            _registry_words():
        previous = registry_actions.delete_compatibility(subject).value
        note.message = f"was {previous}; the global level applies"
    _notify([("subject", subject)], f"Subject {subject}: the global compatibility applies.")
    return previous




# --- Lag analytics: launch, cancel, run and schedule laganalysis jobs ------------------------


def launch_analysis(actor: Actor, job: str, params: Mapping[str, Any],
                    schedule: AnalysisSchedule | None = None,
                    cluster: str | None = None) -> AnalysisRun:
    """Record a QUEUED run of `job` with `params` (validated by its form in
    `controlcenter.analysis.jobs`) on `cluster` (the current one when not given), and queue
    its Celery task once the row is committed. A cluster that is not configured is refused
    (UNKNOWN_CLUSTER), never replaced by another."""
    if job not in analysis_jobs.JOBS:
        raise ActionError(f"Unknown job {job!r}; one of {', '.join(analysis_jobs.JOBS)}.",
                          "INVALID_REQUEST")
    user = _user(actor)
    name = cluster or clusters.current_name()
    with audited(actor, "analysis.launch", f"job {job}", dict(params),
                 cluster=_audit_cluster(name)) as note:
        _configured(name)
        run = AnalysisRun.objects.create(job=job, cluster=name, parameters=dict(params),
                                         schedule=schedule, requested_by=user)
        transaction.on_commit(lambda: execute.queue_analysis(run.pk))
        note.message = f"run {run.pk} queued on {name}"
    execute.publish_run(run)
    return run


def cancel_analysis(actor: Actor, run: AnalysisRun) -> str:
    """Cancel a queued or running run (never `revoke(terminate=True)`: the task polls the
    flag and ends its Spark job's process group). Returns the run's status after it."""
    with audited(actor, "analysis.cancel", f"run {run.pk}", {"job": run.job},
                 cluster=run.cluster) as note:
        if run.finished:
            raise ActionError(f"Run {run.pk} already ended {run.status}.", "RUN_FINISHED")
        status = execute.cancel(run)
        note.message = "cancelled" if status == AnalysisStatus.CANCELLED else "cancel requested"
    return status


def run_analysis(run_id: int, worker: str = "") -> str:
    """The Celery task's body: run the job, store its result or error (analysis.execute)."""
    return execute.run_analysis(run_id, worker)


def fail_orphaned_analyses(worker: str) -> int:
    """Runs left RUNNING by an earlier life of this worker end FAILED (analysis.execute)."""
    return execute.fail_orphans(worker)


def save_analysis_schedule(actor: Actor, spec: ScheduleSpec) -> AnalysisSchedule:
    """The launch page's "save as schedule": create it, or replace the one of that name."""
    existing = AnalysisSchedule.objects.filter(name=spec.name).first()
    if existing is not None:
        return update_analysis_schedule(actor, existing, spec)
    return create_analysis_schedule(actor, spec)


def create_analysis_schedule(actor: Actor, spec: ScheduleSpec) -> AnalysisSchedule:
    """A new enabled schedule: `spec.job` every `spec.every_minutes` over the last
    `spec.window_minutes`, on `spec.cluster` (else the current one); refused when the name is
    taken (SCHEDULE_EXISTS) or the cluster is not configured (UNKNOWN_CLUSTER)."""
    name = spec.cluster or clusters.current_name()
    with audited(actor, "analysis.schedule.create", f"schedule {spec.name}",
                 _schedule_parameters(spec), cluster=_audit_cluster(name)) as note:
        schedule = _store_schedule(AnalysisSchedule(created_by=_user(actor), cluster=name),
                                   spec)
        note.message = f"schedule {schedule.pk}: {spec.job} every {spec.every_minutes} min"
    _notify([("analyses", None)], f"Schedule {spec.name} saved: {spec.job} every "
                                  f"{spec.every_minutes} minutes.")
    return schedule


def update_analysis_schedule(actor: Actor, schedule: AnalysisSchedule, spec: ScheduleSpec
                             ) -> AnalysisSchedule:  # fmt: skip
    """Give the schedule new values (its name too; its cluster when `spec.cluster` names
    one, else it keeps its own); its last launch and state are kept."""
    name = spec.cluster or schedule.cluster
    with audited(actor, "analysis.schedule.update", f"schedule {schedule.name}",
                 _schedule_parameters(spec), cluster=_audit_cluster(name)) as note:
        schedule.cluster = name
        _store_schedule(schedule, spec)
        note.message = f"{spec.job} every {spec.every_minutes} min"
    _notify([("analyses", None)], f"Schedule {spec.name} changed: {spec.job} every "
                                  f"{spec.every_minutes} minutes.")
    return schedule


def enable_analysis_schedule(actor: Actor, schedule: AnalysisSchedule, enabled: bool
                             ) -> AnalysisSchedule:  # fmt: skip
    """Resume (enabled) or pause a schedule; beat launches only enabled ones."""
    verb = "enable" if enabled else "disable"
    with audited(actor, f"analysis.schedule.{verb}", f"schedule {schedule.name}",
                 cluster=schedule.cluster) as note:
        AnalysisSchedule.objects.filter(pk=schedule.pk).update(enabled=enabled)
        schedule.enabled = enabled
        note.message = f"{verb}d"
    _notify([("analyses", None)], f"Schedule {schedule.name} {verb}d.")
    return schedule


def delete_analysis_schedule(actor: Actor, schedule: AnalysisSchedule) -> None:
    """Delete a schedule; the runs it launched stay (their `schedule` becomes empty)."""
    name = schedule.name
    with audited(actor, "analysis.schedule.delete", f"schedule {name}",
                 cluster=schedule.cluster) as note:
        schedule.delete()
        note.message = "deleted"
    _notify([("analyses", None)], f"Schedule {name} deleted.")


def _configured(cluster: str) -> None:
    """A run or schedule is only ever of a configured cluster."""
    try:
        clusters.checked(cluster)
    except clusters.UnknownCluster as exc:
        raise ActionError(str(exc), "UNKNOWN_CLUSTER") from exc


def _audit_cluster(cluster: str) -> str:
    """The cluster an entry about `cluster` is filed under: that one when configured, else
    the current one (so the refusal shows where it was made)."""
    return cluster if cluster in {c.name for c in clusters.configured()} \
        else clusters.current_name()


def _store_schedule(schedule: AnalysisSchedule, spec: ScheduleSpec) -> AnalysisSchedule:
    _configured(schedule.cluster)
    schedule.name, schedule.job = spec.name, spec.job
    schedule.parameters = dict(spec.params)
    schedule.window_minutes, schedule.every_minutes = spec.window_minutes, spec.every_minutes
    try:
        with transaction.atomic():  # a savepoint: the audit entry is still written after it
            schedule.save()
    except IntegrityError as exc:
        raise ActionError(f"A schedule named {spec.name} exists already.",
                          "SCHEDULE_EXISTS") from exc
    return schedule


def _schedule_parameters(spec: ScheduleSpec) -> dict[str, Any]:
    return {"job": spec.job, "window_minutes": spec.window_minutes,
            "every_minutes": spec.every_minutes, **spec.params}


def launch_due_analyses(now: dt.datetime | None = None) -> list[AnalysisRun]:
    """Launch every enabled schedule whose interval has passed (Celery beat's one entry),
    each on its own cluster (beat's process looks at the default one). A schedule of a
    cluster no longer configured gets a FAILED run that says so, never a run on another."""
    now = now or timezone.now()
    runs = []
    for schedule in AnalysisSchedule.objects.filter(enabled=True):
        if not schedule.due(now):
            continue
        until = now.timestamp()
        params = {**schedule.parameters, "until": until,
                  "since": until - schedule.window_minutes * 60}
        unclaimed = AnalysisSchedule.objects.filter(
            pk=schedule.pk, last_launched_at=schedule.last_launched_at)
        with transaction.atomic():
            if unclaimed.update(last_launched_at=now):  # of two workers that saw it due, one
                runs.append(_launch_scheduled(schedule, params))
    return runs


def _launch_scheduled(schedule: AnalysisSchedule, params: dict[str, Any]) -> AnalysisRun:
    try:
        clusters.checked(schedule.cluster)
    except clusters.UnknownCluster as exc:
        error = (f"Not run: {exc} Schedule {schedule.name} launches only on its own "
                 f"cluster; edit or delete it.")
        record(None, "analysis.launch", f"job {schedule.job}", params, ok=False, message=error)
        run = AnalysisRun.objects.create(
            job=schedule.job, cluster=schedule.cluster, parameters=params, schedule=schedule,
            status=AnalysisStatus.FAILED, finished_at=timezone.now(), error=error)
        execute.publish_run(run)
        return run
    return launch_analysis(None, schedule.job, params, schedule=schedule,
                           cluster=schedule.cluster)


def _user(actor: Actor) -> User | None:
    user = getattr(actor, "user", actor)
    return user if isinstance(user, User) and user.is_authenticated else None


# --- Kafka Connect: connectors on the platform's Connect worker (connectapi.py) -------------


class ConnectorCommand(enum.StrEnum):
    PAUSE = "pause"
    RESUME = "resume"
    RESTART = "restart"
    DELETE = "delete"


@contextmanager
def _connect_words() -> Iterator[None]:
    """The worker's refusals (Connect's message) and silence as ActionError."""
    try:
        yield
    except connectapi.ConnectError as exc:
        raise ActionError(f"Kafka Connect refused ({exc.status}): {exc.message}",
                          str(exc.status)) from exc
    except connectapi.ConnectUnavailable as exc:
        raise ActionError(str(exc), "UNAVAILABLE") from exc


def create_connector(actor: Actor, name: str, config: Mapping[str, str]) -> None:
    """POST /connectors. The audit entry names the class, never the config's values
    (a JDBC password is one)."""
    with audited(actor, "connector.create", f"connector {name}",
                 {"connector.class": config.get("connector.class", "")}) as note, \
            _connect_words():
        connectapi.call("POST", "/connectors", {"name": name, "config": dict(config)})
        note.message = f"created {name}"


def operate_connector(actor: Actor, name: str, command: ConnectorCommand) -> None:
    """Pause, resume, restart (with its tasks) or delete a connector."""
    path = "/connectors/" + quote(name, safe="")
    with audited(actor, f"connector.{command.value}", f"connector {name}") as note, \
            _connect_words():
        if command is ConnectorCommand.DELETE:
            connectapi.call("DELETE", path)
        elif command is ConnectorCommand.RESTART:
            connectapi.call("POST", f"{path}/restart?includeTasks=true")
        else:
            connectapi.call("PUT", f"{path}/{command.value}")
        note.message = f"{command.value} sent to {name}"
