"""The control center's own tables: who did what (`AuditEntry`), and the permissions a
state change can require (`ClusterAccess`, no table)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


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
        ]


class AuditEntry(models.Model):
    """One state change attempted through the control center, and how it ended.

    `username` is kept as text so that the entry still says who acted after the account
    is deleted. `parameters` holds what the user asked for (never message payloads or
    secrets; the action chooses), `message` the outcome in the system's own words.
    """

    class Result(models.TextChoices):
        OK = "ok", "ok"
        ERROR = "error", "error"

    at = models.DateTimeField(auto_now_add=True, db_index=True)
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

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.username} {self.action} {self.target}"
