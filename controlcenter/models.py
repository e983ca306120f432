"""The control center's tables.

The read model (ClusterState ... ThroughputHistory) is written by ONE process, the collector
(`manage.py collect`), every MILLRACE_COLLECT_INTERVAL_S; pages and the JSON API only read it,
so rendering a page never calls a broker. README.md ("The read model") lists the tables and
what each column means. Who did what (`AuditEntry`) and the permissions a state change can
require (`ClusterAccess`, no table) come next; the lag analyses (`AnalysisRun`,
`AnalysisSchedule`) last.
"""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.db import models
from django.utils import timezone

from controlcenter import clusters

# --- The read model: the latest snapshot ---------------------------------------------------
# Every read-model row but ClusterState's carries its cluster's name (`cluster`), and the
# `objects` manager sees only the current cluster's rows (controlcenter/clusters.py).


def cluster_field() -> models.CharField[str, str]:
    return models.CharField(max_length=100, default=clusters.current_name)


class BurrowStatus(models.TextChoices):
    """Burrow's evaluation statuses (laganalysis.burrow computes them)."""

    NOTFOUND = "NOTFOUND"
    OK = "OK"
    WARN = "WARN"
    ERR = "ERR"
    STOP = "STOP"
    STALL = "STALL"
    REWIND = "REWIND"


class ClusterState(models.Model):
    """One row per watched cluster (keyed by its bootstrap servers): health and counts."""

    bootstrap_servers = models.CharField(max_length=1000, unique=True)
    cluster_id = models.CharField(max_length=200, null=True, blank=True)
    controller_id = models.IntegerField(null=True)
    collected_at = models.DateTimeField(null=True)  # end of the last successful cycle
    reachable = models.BooleanField(default=False)
    last_error = models.TextField(blank=True, default="")
    unreachable_since = models.DateTimeField(null=True)
    cycle_seconds = models.FloatField(null=True)  # how long the last cycle took
    interval_seconds = models.FloatField(default=5.0)
    brokers = models.IntegerField(default=0)  # brokers in the metadata (up)
    topics = models.IntegerField(default=0)
    partitions = models.IntegerField(default=0)
    under_replicated = models.IntegerField(default=0)
    offline = models.IntegerField(default=0)
    under_min_isr = models.IntegerField(default=0)
    groups = models.IntegerField(default=0)
    # From the brokers' metrics on the built-in cluster; None where no metrics are reachable.
    active_controller_count = models.IntegerField(null=True)
    # Partitions led by their preferred (first) replica / partitions with a leader.
    preferred_leader_ratio = models.FloatField(null=True)

    @classmethod
    def current(cls) -> ClusterState | None:
        """The row of the cluster the control center is looking at (clusters.current())."""
        return cls.objects.filter(bootstrap_servers=clusters.current().bootstrap_servers).first()


class BrokerStatus(models.TextChoices):
    UP = "up"  # in the cluster's metadata
    FENCED = "fenced"  # its process runs but the cluster does not list it
    DOWN = "down"  # seen before, now neither listed nor running


class BrokerState(models.Model):
    cluster = cluster_field()
    node_id = models.IntegerField()
    host = models.CharField(max_length=255)
    port = models.IntegerField()
    rack = models.CharField(max_length=255, null=True, blank=True)
    status = models.CharField(max_length=8, choices=BrokerStatus.choices)
    is_controller = models.BooleanField(default=False)
    partitions = models.IntegerField(default=0)  # replicas it holds
    leaders = models.IntegerField(default=0)  # partitions it leads
    bytes_in_per_sec = models.FloatField(null=True)
    bytes_out_per_sec = models.FloatField(null=True)
    messages_in_per_sec = models.FloatField(null=True)
    # The built-in cluster's supervisor: running/paused/killed/stopped/exited/...; None for
    # an external cluster.
    process_state = models.CharField(max_length=40, null=True, blank=True)
    updated_at = models.DateTimeField()

    objects = clusters.ClusterScoped()

    class Meta:
        ordering = ["node_id"]
        constraints = [models.UniqueConstraint(fields=["cluster", "node_id"],
                                               name="brokerstate_cluster_node")]


class TopicState(models.Model):
    cluster = cluster_field()
    name = models.CharField(max_length=249)  # indexed: search and pagination
    internal = models.BooleanField(default=False)
    partitions = models.IntegerField()
    replication_factor = models.IntegerField()
    under_replicated = models.IntegerField(default=0)
    offline = models.IntegerField(default=0)
    under_min_isr = models.IntegerField(default=0)
    min_insync_replicas = models.IntegerField(null=True)
    total_messages = models.BigIntegerField(default=0)  # sum of end - log start
    size_bytes = models.BigIntegerField(null=True)
    messages_in_per_sec = models.FloatField(null=True)
    bytes_in_per_sec = models.FloatField(null=True)
    updated_at = models.DateTimeField()

    objects = clusters.ClusterScoped()

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"],
                                               name="topicstate_cluster_name")]


class PartitionState(models.Model):
    cluster = cluster_field()
    topic = models.CharField(max_length=249)
    partition = models.IntegerField()
    leader = models.IntegerField(null=True)  # None: offline
    replicas = models.JSONField(default=list)  # node ids, preferred leader first
    isr = models.JSONField(default=list)
    offline = models.BooleanField(default=False)
    under_replicated = models.BooleanField(default=False)
    under_min_isr = models.BooleanField(default=False)
    log_start_offset = models.BigIntegerField(null=True)
    log_end_offset = models.BigIntegerField(null=True)  # the high watermark
    size_bytes = models.BigIntegerField(null=True)
    messages_in_per_sec = models.FloatField(null=True)
    updated_at = models.DateTimeField()

    objects = clusters.ClusterScoped()

    class Meta:
        ordering = ["topic", "partition"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "topic", "partition"],
                                    name="partitionstate_ctp")
        ]


class GroupState(models.Model):
    cluster = cluster_field()
    group_id = models.CharField(max_length=255)
    # clusterclient's GroupType and GroupState values: classic/consumer; STABLE, EMPTY,
    # PREPARING_REBALANCE, ASSIGNING, RECONCILING, DEAD, UNKNOWN, ...
    group_type = models.CharField(max_length=16, default="classic", db_default="classic")
    state = models.CharField(max_length=40)
    protocol_type = models.CharField(max_length=80, blank=True, default="")
    protocol = models.CharField(max_length=80, blank=True, default="")  # assignor
    members = models.IntegerField(default=0)
    # A consumer group's members that do not own their target assignment yet (KIP-848).
    reconciling = models.IntegerField(default=0, db_default=0)
    coordinator = models.IntegerField(null=True)
    topics = models.IntegerField(default=0)  # topics with committed offsets
    partitions = models.IntegerField(default=0)
    total_lag = models.BigIntegerField(default=0)
    max_lag = models.BigIntegerField(default=0)
    max_lag_seconds = models.FloatField(null=True)
    status = models.CharField(max_length=8, choices=BurrowStatus.choices,
                              default=BurrowStatus.NOTFOUND)
    complete = models.FloatField(default=0.0)  # fraction of Burrow's window filled
    updated_at = models.DateTimeField()

    objects = clusters.ClusterScoped()

    class Meta:
        ordering = ["group_id"]
        constraints = [models.UniqueConstraint(fields=["cluster", "group_id"],
                                               name="groupstate_cluster_group")]
        indexes = [models.Index(fields=["status", "-max_lag"], name="groupstate_trouble")]


class GroupPartitionLag(models.Model):
    cluster = cluster_field()
    group_id = models.CharField(max_length=255)
    topic = models.CharField(max_length=249)
    partition = models.IntegerField()
    committed_offset = models.BigIntegerField(null=True)  # None: no commit for it
    end_offset = models.BigIntegerField(null=True)
    lag = models.BigIntegerField(default=0)
    lag_seconds = models.FloatField(null=True)  # None: too few end-offset points yet
    status = models.CharField(max_length=8, choices=BurrowStatus.choices,
                              default=BurrowStatus.NOTFOUND)
    consumer_id = models.CharField(max_length=255, blank=True, default="")
    client_id = models.CharField(max_length=255, blank=True, default="")
    host = models.CharField(max_length=255, blank=True, default="")
    updated_at = models.DateTimeField()

    objects = clusters.ClusterScoped()

    class Meta:
        ordering = ["group_id", "topic", "partition"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "group_id", "topic", "partition"],
                                    name="grouppartitionlag_cgtp")
        ]
        indexes = [models.Index(fields=["topic"], name="grouppartitionlag_topic")]


# --- History: bounded by laganalysis's retention policy ------------------------------------


class Resolution(models.TextChoices):
    RAW = "raw"  # one row per collector cycle (or per change)
    MINUTE = "minute"  # downsampled: the last sample of each minute, max lag of that minute


class GroupLagHistory(models.Model):
    """A group's lag every cycle; the group-level chart reads only this table."""

    cluster = cluster_field()
    group_id = models.CharField(max_length=255)
    ts = models.DateTimeField()
    resolution = models.CharField(max_length=6, choices=Resolution.choices,
                                  default=Resolution.RAW)
    total_lag = models.BigIntegerField()
    max_lag = models.BigIntegerField()
    max_lag_seconds = models.FloatField(null=True)
    status = models.CharField(max_length=8, choices=BurrowStatus.choices)

    objects = clusters.ClusterScoped()

    class Meta:
        indexes = [models.Index(fields=["group_id", "ts"], name="grouplaghistory_gts"),
                   models.Index(fields=["resolution", "ts"], name="grouplaghistory_rts")]


class PartitionLagHistory(models.Model):
    """A partition's lag, written only when its committed or end offset changed (README)."""

    cluster = cluster_field()
    group_id = models.CharField(max_length=255)
    topic = models.CharField(max_length=249)
    partition = models.IntegerField()
    ts = models.DateTimeField()
    resolution = models.CharField(max_length=6, choices=Resolution.choices,
                                  default=Resolution.RAW)
    committed_offset = models.BigIntegerField(null=True)
    end_offset = models.BigIntegerField(null=True)
    lag = models.BigIntegerField()
    lag_seconds = models.FloatField(null=True)
    status = models.CharField(max_length=8, choices=BurrowStatus.choices)

    objects = clusters.ClusterScoped()

    class Meta:
        indexes = [
            models.Index(fields=["group_id", "topic", "partition", "ts"],
                         name="partlaghistory_gtpts"),
            models.Index(fields=["resolution", "ts"], name="partlaghistory_rts"),
        ]


class ThroughputKind(models.TextChoices):
    TOPIC = "topic"
    BROKER = "broker"


class ThroughputHistory(models.Model):
    """Messages/bytes per second of a topic or broker (name = topic or node id) over time."""

    cluster = cluster_field()
    kind = models.CharField(max_length=6, choices=ThroughputKind.choices)
    name = models.CharField(max_length=249)
    ts = models.DateTimeField()
    resolution = models.CharField(max_length=6, choices=Resolution.choices,
                                  default=Resolution.RAW)
    messages_in_per_sec = models.FloatField(null=True)
    bytes_in_per_sec = models.FloatField(null=True)
    bytes_out_per_sec = models.FloatField(null=True)

    objects = clusters.ClusterScoped()

    class Meta:
        indexes = [models.Index(fields=["kind", "name", "ts"], name="throughput_knts"),
                   models.Index(fields=["resolution", "ts"], name="throughput_rts")]


class ClusterEvent(models.Model):
    """What the collector saw change (also appended to the internal events topic)."""

    cluster = cluster_field()
    ts = models.DateTimeField()
    kind = models.CharField(max_length=40)  # laganalysis.records event kinds, plus unreachable
    subject = models.CharField(max_length=300)  # "broker 2", "orders-3", "group g1"
    detail = models.JSONField(default=dict)

    objects = clusters.ClusterScoped()

    class Meta:
        ordering = ["-ts", "-id"]
        indexes = [models.Index(fields=["-ts"], name="clusterevent_ts")]


# --- Access and audit ------------------------------------------------------------------


class ClusterAccess(models.Model):
    """Holds the control center's permissions; it has no table and no rows.

    Django permissions hang off a model, and these are about the cluster, which is not
    in the database. `access.Capability` names them for code.
    """

    class Meta:
        managed = False
        default_permissions = ()
        permissions = [
            ("operate_cluster", "Stop, kill, start and restart brokers"),
            ("change_topics", "Create and delete topics, edit topic configs"),
            ("produce_messages", "Produce messages to topics"),
            ("change_groups", "Reset consumer group offsets, delete groups"),
            ("change_schemas", "Register schemas, change compatibility, delete versions"),
            ("run_analyses", "Launch, schedule and cancel lag analyses"),
            ("change_connectors", "Create, pause, resume, restart and delete Kafka Connect "
                                  "connectors"),
        ]


class AuditEntry(models.Model):
    """One state change attempted through the control center, and how it ended.

    `username` is kept as text so that the entry still says who acted after the account
    is deleted. `parameters` holds what the user asked for (never message payloads or
    secrets; the action chooses), `message` the outcome in the system's own words.
    `cluster`: the cluster the change was made on (the one the user was looking at, or the
    run's or schedule's); the audit log shows the current cluster's entries by default.
    """

    class Result(models.TextChoices):
        OK = "ok", "ok"
        ERROR = "error", "error"

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    cluster = cluster_field()
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="audit_entries",
    )  # fmt: skip
    username = models.CharField(max_length=150)
    action = models.CharField(max_length=64, help_text="e.g. topic.create, broker.kill")
    target = models.CharField(max_length=512, blank=True, help_text="e.g. topic orders")
    parameters = models.JSONField(default=dict, blank=True)
    result = models.CharField(max_length=8, choices=Result.choices)
    message = models.TextField(blank=True)
    remote_addr = models.GenericIPAddressField(null=True, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name_plural = "audit entries"
        indexes = [models.Index(fields=["cluster", "-at"], name="auditentry_cluster_at")]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.username} {self.action} {self.target}"


# --- Lag analytics: runs of laganalysis's Spark jobs, and their schedules ----------------


class AnalysisStatus(models.TextChoices):
    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


FINISHED = (AnalysisStatus.SUCCEEDED, AnalysisStatus.FAILED, AnalysisStatus.CANCELLED)


class AnalysisRun(models.Model):
    """One launch of a `laganalysis.run` job (README.md, "Lag analytics").

    Moves QUEUED -> RUNNING -> SUCCEEDED/FAILED/CANCELLED, each step a conditional UPDATE
    (`controlcenter.analysis.execute`), so a cancel and a start never both win. `result`
    (the job's tables and chart series, `laganalysis.jobs.result.JobResult` JSON) is written
    in the same transaction as SUCCEEDED and never otherwise: a cancelled or failed run
    holds no partial result. `cancel_requested` is the flag the running task polls.
    `cluster`: the configured cluster it was launched for, whose history its Spark job reads
    (a run whose cluster is no longer configured ends FAILED, never runs on another).
    """

    job = models.CharField(max_length=40)
    cluster = cluster_field()
    parameters = models.JSONField(default=dict)  # what was asked, as the form cleaned it
    status = models.CharField(max_length=10, choices=AnalysisStatus.choices,
                              default=AnalysisStatus.QUEUED, db_index=True)
    cancel_requested = models.BooleanField(default=False)
    stages_done = models.IntegerField(default=0)
    stages_total = models.IntegerField(default=0)
    stages_skipped = models.IntegerField(default=0)  # Spark reused their output
    tasks_done = models.IntegerField(default=0)
    tasks_total = models.IntegerField(default=0)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                     on_delete=models.SET_NULL, related_name="analysis_runs")
    schedule = models.ForeignKey("AnalysisSchedule", null=True, blank=True,
                                 on_delete=models.SET_NULL, related_name="runs")
    master = models.CharField(max_length=200, blank=True, default="")  # local[*], spark://...
    worker = models.CharField(max_length=200, blank=True, default="")  # Celery hostname
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True, default="")  # Spark's error, readable
    result = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["cluster", "-created_at"],
                                name="analysisrun_cluster_created")]

    def __str__(self) -> str:
        return f"analysis {self.pk} {self.job} {self.status}"

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    @property
    def duration_seconds(self) -> float | None:
        if self.started_at is None:
            return None
        end = self.finished_at or timezone.now()
        return max(0.0, (end - self.started_at).total_seconds())


class AnalysisSchedule(models.Model):
    """A job launched every `every_minutes` over the last `window_minutes` of history.

    Read by one Celery beat entry (`launch_due_analyses_task`, every minute), which launches
    the due schedules through the same action a click uses, each on its `cluster` (one no
    longer configured gets a FAILED run saying so).
    """

    name = models.CharField(max_length=100, unique=True)
    job = models.CharField(max_length=40)
    cluster = cluster_field()
    parameters = models.JSONField(default=dict)  # the form's fields, without the window
    window_minutes = models.PositiveIntegerField(default=60)
    every_minutes = models.PositiveIntegerField(default=60)
    enabled = models.BooleanField(default=True)
    last_launched_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"schedule {self.name}: {self.job} every {self.every_minutes} min"

    def due(self, now: dt.datetime) -> bool:
        """Whether beat (which looks every minute) launches it now."""
        return self.enabled and (self.last_launched_at is None or now >= self.last_launched_at
                                 + dt.timedelta(minutes=self.every_minutes))

    @property
    def next_launch_at(self) -> dt.datetime | None:
        """When beat launches it next: None while disabled; now when it never launched."""
        if not self.enabled:
            return None
        if self.last_launched_at is None:
            return timezone.now()
        return self.last_launched_at + dt.timedelta(minutes=self.every_minutes)

from controlcenter.streams.models import LagAlert, StreamQuery  # noqa: E402,F401  (its own module; one app)
