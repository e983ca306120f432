"""The stream queries' table (controlcenter/README.md, "Streams"); `controlcenter.models`
imports it, so it is the app's model like the others."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models


class StreamState(models.TextChoices):
    QUEUED = "QUEUED"  # to run; no task has it yet
    RUNNING = "RUNNING"  # its task runs its driver
    RESTARTING = "RESTARTING"  # its driver crashed; its task starts it again
    STOPPED = "STOPPED"
    FAILED = "FAILED"  # could not start, or crashed too often: last_error says why


# The states in which a query should run: the supervisor gives such a query a task when no
# live task holds it (its heartbeat is stale).
ACTIVE = (StreamState.QUEUED, StreamState.RUNNING, StreamState.RESTARTING)


class ValueFormat(models.TextChoices):
    JSON = "json", "JSON (the row as an object)"
    RAW = "raw", "raw (the query's value column)"
    AVRO = "avro", "Avro (the row, its schema registered as <topic>-value)"
    JSONSCHEMA = "jsonschema", "JSON Schema (the row, its schema registered as <topic>-value)"
    PROTOBUF = "protobuf", "Protobuf (the row, its schema registered as <topic>-value)"



class QueryKind(models.TextChoices):
    SQL = "sql", "SQL (the user's query)"
    # Built in: laganalysis/alertstream.py over _millrace-lag-samples, `params` its Rule.
    LAG_ANOMALY = "lag-anomaly", "lag anomaly alerts (built in)"


class OutputMode(models.TextChoices):
    APPEND = "append", "append (each row once; aggregations need a watermark)"
    UPDATE = "update", "update (changed aggregates every batch)"


class StreamQuery(models.Model):
    """A persistent query: Spark SQL over topics, run continuously into `output_topic`.

    `state` moves as StreamState says, always by a conditional UPDATE
    (`controlcenter.streams.supervise`). `task_token`/`heartbeat_at` are the claim of the one
    Celery task running the query's driver: a task renews its heartbeat every few seconds,
    and a query in an ACTIVE state whose heartbeat is stale is given a new task. The Spark
    checkpoint (`checkpoint`, under MILLRACE_STREAMS_DIR) holds its offsets and state, so a
    new driver resumes where the last one stopped. `progress` keeps the latest points of
    StreamingQuery.lastProgress for the page's charts.
    """

    name = models.SlugField(max_length=100, unique=True)
    kind = models.CharField(max_length=20, choices=QueryKind.choices, default=QueryKind.SQL)
    params = models.JSONField(default=dict, blank=True)  # a built-in kind's settings
    sql = models.TextField(blank=True, default="")
    source_topics = models.JSONField(default=list)  # the topics the SQL reads, as validated
    output_topic = models.CharField(max_length=249)
    key_column = models.CharField(max_length=200, blank=True, default="")
    value_format = models.CharField(max_length=10, choices=ValueFormat.choices,
                                    default=ValueFormat.JSON)
    output_mode = models.CharField(max_length=10, choices=OutputMode.choices,
                                   default=OutputMode.APPEND)
    state = models.CharField(max_length=12, choices=StreamState.choices,
                             default=StreamState.QUEUED, db_index=True)
    checkpoint = models.CharField(max_length=500)
    stop_requested = models.BooleanField(default=False)
    restart_requested = models.BooleanField(default=False)
    last_error = models.TextField(blank=True, default="")
    restarts = models.IntegerField(default=0)  # crashes its task restarted it after
    spark_query_id = models.CharField(max_length=64, blank=True, default="")
    task_token = models.CharField(max_length=64, blank=True, default="")
    worker = models.CharField(max_length=200, blank=True, default="")
    driver_pid = models.IntegerField(null=True, blank=True)  # its Spark driver's process group
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    progress = models.JSONField(default=list)  # the latest progress points, oldest first
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="stream_queries")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "controlcenter"
        ordering = ["name"]

    def __str__(self) -> str:
        return f"stream query {self.name} {self.state}"

    @property
    def active(self) -> bool:
        return self.state in ACTIVE

    @property
    def last_progress(self) -> dict[str, Any] | None:
        return self.progress[-1] if self.progress else None


class LagAlert(models.Model):
    """One record of a lag-anomaly query's output topic (laganalysis.records.LagAlertRecord):
    a group's lag on a topic turned anomalous against its rolling baseline (RAISED) or back
    (CLEARED). Read from the topic by the query's task (`streams/alertfeed.py`); the record's
    place in the topic is unique, so reading a record twice stores it once, and the newest
    offset stored per partition is where the feed resumes."""

    group_id = models.CharField(max_length=255)
    topic = models.CharField(max_length=249)
    ts = models.DateTimeField()  # the judged cycle's sample time
    state = models.CharField(max_length=8)  # RAISED or CLEARED
    lag = models.BigIntegerField()
    mean = models.FloatField()
    stddev = models.FloatField()
    threshold = models.FloatField()
    query = models.ForeignKey(StreamQuery, null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="lag_alerts")
    source_topic = models.CharField(max_length=249)
    source_partition = models.IntegerField()
    source_offset = models.BigIntegerField()
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "controlcenter"
        ordering = ["-ts", "-pk"]
        indexes = [models.Index(fields=["group_id", "-ts"])]
        constraints = [models.UniqueConstraint(
            fields=["source_topic", "source_partition", "source_offset"],
            name="lag_alert_record_once")]

    def __str__(self) -> str:
        return f"lag alert {self.state} {self.group_id} {self.topic}"
