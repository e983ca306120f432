"""The registry's tables.

Schemas are immutable once written and never removed, so an id keeps naming the same
schema for good (a schema no subject version uses any more is simply not served).
Subject rows exist to be locked: registrations in one subject serialize on that row.
"""

from __future__ import annotations

from django.db import models

GLOBAL = ""  # the subject of the global Config and Mode rows


class Schema(models.Model):
    """A distinct schema: its canonical text, type and references, under a global id."""

    id = models.PositiveIntegerField(primary_key=True)
    # sha256 of type, canonical text and references: what "the same schema" means
    fingerprint = models.CharField(max_length=64, unique=True)
    schema_type = models.CharField(max_length=16, default="AVRO")
    text = models.TextField()
    references = models.JSONField(default=list)  # [{"name", "subject", "version"}]

    def __str__(self) -> str:
        return f"schema {self.id}"


class Subject(models.Model):
    name = models.CharField(max_length=1024, unique=True)

    def __str__(self) -> str:
        return self.name


class SubjectVersion(models.Model):
    subject = models.ForeignKey(Subject, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    schema = models.ForeignKey(Schema, on_delete=models.PROTECT, related_name="versions")
    deleted = models.BooleanField(default=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["subject", "version"], name="registry_subject_version")
        ]

    def __str__(self) -> str:
        return f"{self.subject_id} v{self.version}"


class Reference(models.Model):
    """A named type `schema` takes from another subject's version (for `referencedby`)."""

    schema = models.ForeignKey(Schema, on_delete=models.CASCADE, related_name="reference_rows")
    name = models.CharField(max_length=1024)
    subject = models.CharField(max_length=1024, db_index=True)
    version = models.PositiveIntegerField()

    def __str__(self) -> str:
        return f"{self.schema_id} -> {self.subject} v{self.version}"


class Config(models.Model):
    subject = models.CharField(max_length=1024, unique=True)  # GLOBAL for the global row
    compatibility = models.CharField(max_length=32, null=True)
    normalize = models.BooleanField(null=True)

    def __str__(self) -> str:
        return f"{self.subject or 'global'}: {self.compatibility}"


class Mode(models.Model):
    subject = models.CharField(max_length=1024, unique=True)  # GLOBAL for the global row
    mode = models.CharField(max_length=16)

    def __str__(self) -> str:
        return f"{self.subject or 'global'}: {self.mode}"
