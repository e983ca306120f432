"""Reads: subjects, versions and schemas as the API returns them, and parsed schemas.

Parsed schemas are kept per process keyed by content (the schema's fingerprint and the
keys of everything it references), never by id or subject version, so the cache cannot
serve a stale parse whatever happens to ids and versions.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from . import avro, errors
from .cache import schemas_by_id
from .compatibility import DEFAULT_LEVEL, Level, check_level
from .models import GLOBAL, Config, Mode, Reference, Schema, SubjectVersion
from .params import LATEST

READWRITE = "READWRITE"
READONLY = "READONLY"
READONLY_OVERRIDE = "READONLY_OVERRIDE"
IMPORT = "IMPORT"
MODES = frozenset({READWRITE, READONLY, IMPORT, READONLY_OVERRIDE, "FORWARD"})
MAX_REFERENCE_DEPTH = 32


def fingerprint(schema_type: str, text: str, references: list[dict[str, Any]]) -> str:
    key = json.dumps([schema_type, text, references], separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(key.encode()).hexdigest()


def subject_versions(subject: str, deleted: bool = False) -> list[SubjectVersion]:
    rows = SubjectVersion.objects.filter(subject__name=subject).select_related("schema")
    rows = rows if deleted else rows.filter(deleted=False)
    return list(rows.order_by("version"))


def subject_version(subject: str, number: int, deleted: bool = False) -> SubjectVersion:
    """One version (LATEST for the newest); 40401 or 40402 when missing."""
    rows = subject_versions(subject, deleted=True)
    if not rows or (not deleted and all(row.deleted for row in rows)):
        raise errors.subject_not_found(subject)
    visible = [row for row in rows if deleted or not row.deleted]
    if number == LATEST:
        return visible[-1]
    for row in visible:
        if row.version == number:
            return row
    raise errors.version_not_found(number)


def version_body(row: SubjectVersion) -> dict[str, Any]:
    body: dict[str, Any] = {
        "subject": row.subject.name,
        "version": row.version,
        "id": row.schema_id,
        "schemaType": row.schema.schema_type,
    }
    if row.schema.references:
        body["references"] = row.schema.references
    body["schema"] = row.schema.text
    return body


def schema_body(schema_id: int) -> dict[str, Any]:
    """What `/schemas/ids/{id}` returns, through the reader cache; 40403 if not served."""
    body = schemas_by_id.get(schema_id, _load_schema_body)
    if body is None:
        raise errors.schema_not_found(schema_id)
    return dict(body)


def _load_schema_body(schema_id: int) -> dict[str, Any] | None:
    schema = Schema.objects.filter(id=schema_id, versions__isnull=False).first()
    if schema is None:
        return None
    body: dict[str, Any] = {"schemaType": schema.schema_type, "schema": schema.text}
    if schema.references:
        body["references"] = schema.references
    return body


def referenced_by(subject: str, version: int) -> list[int]:
    rows = Reference.objects.filter(
        subject=subject, version=version, schema__versions__deleted=False
    )
    return sorted(set(rows.values_list("schema_id", flat=True)))


def compatibility_level(subject: str | None) -> Level:
    for config in _configs(subject):
        if config.compatibility:
            return Level(config.compatibility)
    return DEFAULT_LEVEL


def compatibility_messages(
    subject: str, parsed: avro.AvroSchema, version: int | None = None
) -> list[str]:
    """Why `parsed` may not join `subject` under its level ([] = compatible): against one
    version (its level without _TRANSITIVE, as Confluent does) or the live versions."""
    level = compatibility_level(subject)
    if version is None:
        rows = subject_versions(subject)
    else:
        rows = [subject_version(subject, version)]
        level = Level(level.removesuffix("_TRANSITIVE"))
    return check_level(level, parsed, [(row.version, parsed_schema(row.schema)) for row in rows])


def normalize_configured(subject: str | None) -> bool:
    for config in _configs(subject):
        if config.normalize is not None:
            return config.normalize
    return False


def _configs(subject: str | None) -> list[Config]:
    names = [GLOBAL] if subject is None else [subject, GLOBAL]
    by_subject = {c.subject: c for c in Config.objects.filter(subject__in=names)}
    return [by_subject[name] for name in names if name in by_subject]


def mode(subject: str | None) -> str:
    names = [GLOBAL] if subject is None else [subject, GLOBAL]
    by_subject = dict(Mode.objects.filter(subject__in=names).values_list("subject", "mode"))
    return next((by_subject[name] for name in names if name in by_subject), READWRITE)


def resolve_references(references: list[dict[str, Any]], depth: int = 0) -> list[avro.AvroSchema]:
    """The parsed schemas that `references` name; 42201 if one does not exist."""
    return [schema for _, schema in _resolve(references, depth)]


def parsed_schema(schema: Schema) -> avro.AvroSchema:
    return _parsed(schema, 0)[1]


ParseKey = tuple[str, tuple[Any, ...]]
_parse_cache: dict[ParseKey, avro.AvroSchema] = {}


def _resolve(
    references: list[dict[str, Any]], depth: int
) -> list[tuple[ParseKey, avro.AvroSchema]]:
    if depth > MAX_REFERENCE_DEPTH:
        raise errors.invalid_schema("references nest too deeply or form a cycle")
    resolved = []
    for reference in references:
        try:
            subject, number = str(reference["subject"]), int(reference["version"])
            row = subject_version(subject, number)
        except (KeyError, TypeError, ValueError, errors.RegistryError) as exc:
            raise errors.invalid_schema(f"Invalid reference {json.dumps(reference)}") from exc
        resolved.append(_parsed(row.schema, depth + 1))
    return resolved


def _parsed(schema: Schema, depth: int) -> tuple[ParseKey, avro.AvroSchema]:
    references = _resolve(schema.references, depth) if schema.references else []
    key: ParseKey = (schema.fingerprint, tuple(k for k, _ in references))
    parsed = _parse_cache.get(key)
    if parsed is None:
        if len(_parse_cache) > 4096:
            _parse_cache.clear()
        parsed = avro.parse(schema.text, [ref for _, ref in references])
        _parse_cache[key] = parsed
    return key, parsed
