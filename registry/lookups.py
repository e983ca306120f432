"""Reads: subjects, versions and schemas as the API returns them, and parsed schemas.

Parsed schemas are kept per process keyed by content (the schema's fingerprint and the
keys of everything it references), never by id or subject version, so the cache cannot
serve a stale parse whatever happens to ids and versions.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from . import errors, formats
from .cache import need_database, reader_cache
from .compatibility import DEFAULT_LEVEL, Incompatibility, Level, check_level
from .formats import ParsedSchema, Resolved
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
    """A subject's versions in order, through the reader cache (see cache.py)."""
    rows: list[SubjectVersion] = reader_cache.get(
        ("versions", subject), lambda: stored_subject_versions(subject)
    )
    return rows if deleted else [row for row in rows if not row.deleted]


def stored_subject_versions(subject: str) -> list[SubjectVersion]:
    """Every version from the database: for writers, inside their transaction."""
    rows = SubjectVersion.objects.filter(subject__name=subject).select_related("schema", "subject")
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
    }
    if row.schema.schema_type != formats.AVRO:  # Confluent leaves AVRO's out
        body["schemaType"] = row.schema.schema_type
    if row.schema.references:
        body["references"] = row.schema.references
    body["schema"] = row.schema.text
    return body


def schema_body(schema_id: int, fmt: str | None = None) -> dict[str, Any]:
    """What `/schemas/ids/{id}` returns (with `?format=fmt`), through the reader cache;
    40403 if not served. Formatted texts are cached too: Protobuf readers ask for
    `serialized` every time."""
    key = ("id", schema_id) if not fmt else ("id", schema_id, fmt)
    body = reader_cache.get(key, lambda: _load_schema_body(schema_id, fmt))
    if body is None:
        raise errors.schema_not_found(schema_id)
    return dict(body)


def _load_schema_body(schema_id: int, fmt: str | None) -> dict[str, Any] | None:
    schema = Schema.objects.filter(id=schema_id, versions__isnull=False).first()
    if schema is None:
        return None
    body: dict[str, Any] = {}
    if schema.schema_type != formats.AVRO:
        body["schemaType"] = schema.schema_type
    body["schema"] = formatted_text(schema, fmt) if fmt else schema.text
    if schema.references:
        body["references"] = schema.references
    return body


def formatted_text(schema: Schema, fmt: str) -> str:
    """The schema's text in `fmt` (`?format=`); its own text when the format has no such
    rendering, as Confluent ignores a format a schema type does not know."""
    schema_format = formats.get(schema.schema_type)
    found = schema_format.formatted(parsed_schema(schema), fmt)
    return schema.text if found is None else found


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
    subject: str, parsed: ParsedSchema, version: int | None = None,
    schema_type: str = formats.AVRO,
) -> list[str]:
    """Why `parsed` may not join `subject` under its level ([] = compatible): against one
    version (its level without _TRANSITIVE, as Confluent does) or the live versions."""
    level = compatibility_level(subject)
    if version is None:
        rows = subject_versions(subject)
    else:
        rows = [subject_version(subject, version)]
        level = Level(level.removesuffix("_TRANSITIVE"))
    return level_messages(level, schema_type, parsed, rows)


def level_messages(
    level: Level, schema_type: str, parsed: ParsedSchema, rows: list[SubjectVersion]
) -> list[str]:
    """Why `parsed` (of `schema_type`) conflicts with `rows` under `level`; a version of
    another type conflicts whatever the level but NONE, as Confluent's does."""
    schema_format = formats.get(schema_type)

    def rules(reader: ParsedSchema, writer: ParsedSchema) -> list[Incompatibility]:
        if type(reader) is not type(writer):
            return [Incompatibility("TYPE_MISMATCH", "/", "Incompatible schema type",
                                    f"the schema types differ, new: {schema_type}")]
        return schema_format.reader_incompatibilities(reader, writer)

    previous = [(row.version, parsed_schema(row.schema)) for row in rows]
    return check_level(level, parsed, previous, rules)


def normalize_configured(subject: str | None) -> bool:
    for config in _configs(subject):
        if config.normalize is not None:
            return config.normalize
    return False


def _configs(subject: str | None) -> list[Config]:
    names = [GLOBAL] if subject is None else [subject, GLOBAL]

    def load() -> list[Config]:
        by_subject = {c.subject: c for c in Config.objects.filter(subject__in=names)}
        return [by_subject[name] for name in names if name in by_subject]

    configs: list[Config] = reader_cache.get(("configs", subject), load)
    return configs


def mode(subject: str | None) -> str:
    names = [GLOBAL] if subject is None else [subject, GLOBAL]

    def load() -> str:
        by_subject = dict(Mode.objects.filter(subject__in=names).values_list("subject", "mode"))
        return next((by_subject[name] for name in names if name in by_subject), READWRITE)

    found: str = reader_cache.get(("mode", subject), load)
    return found


def resolve_references(references: list[dict[str, Any]], depth: int = 0) -> list[Resolved]:
    """The parsed schemas that `references` name; 42201 if one does not exist."""
    return [resolved for _, resolved in _resolve(references, depth)]


def parsed_schema(schema: Schema) -> ParsedSchema:
    return _parsed(schema, 0)[1]


ParseKey = tuple[str, tuple[Any, ...]]
_parse_cache: dict[ParseKey, ParsedSchema] = {}


def _resolve(
    references: list[dict[str, Any]], depth: int
) -> list[tuple[ParseKey, Resolved]]:
    if depth > MAX_REFERENCE_DEPTH:
        raise errors.invalid_schema("references nest too deeply or form a cycle")
    resolved = []
    for reference in references:
        try:
            subject, number = str(reference["subject"]), int(reference["version"])
            row = subject_version(subject, number)
        except (KeyError, TypeError, ValueError, errors.RegistryError) as exc:
            raise errors.invalid_schema(f"Invalid reference {json.dumps(reference)}") from exc
        key, parsed = _parsed(row.schema, depth + 1)
        name = str(reference.get("name") or "")
        resolved.append((key, Resolved(name, parsed, row.schema.schema_type)))
    return resolved


def _parsed(schema: Schema, depth: int) -> tuple[ParseKey, ParsedSchema]:
    references = _resolve(schema.references, depth) if schema.references else []
    key: ParseKey = (schema.fingerprint, tuple((k, r.name) for k, r in references))
    parsed = _parse_cache.get(key)
    if parsed is None:
        if schema.schema_type != formats.AVRO:
            need_database()  # not on the event loop: protoc and metaschemas take a while
        if len(_parse_cache) > 4096:
            _parse_cache.clear()
        schema_format = formats.get(schema.schema_type)
        parsed = schema_format.parse(schema.text, [r for _, r in references], False)
        _parse_cache[key] = parsed
    return key, parsed
