"""Avro schemas: parse and validate, render the canonical text, resolve references.

fastavro (`parse_schema`) resolves names and namespaces and rejects most malformed
schemas; it is lenient about a few things the Avro specification and Confluent's Java
parser reject (missing `fields`, duplicate union branches, invalid names, a union default
that does not match the first branch), so a structural pass over the raw JSON runs first
and defaults are validated afterwards on the resolved form.

The *canonical text* is what the registry stores, returns and deduplicates on: the schema
as compact JSON with the attributes of each object in a fixed order and `{"type": "int"}`
written as `"int"`. With `normalize`, names are also written fully qualified (namespaces
folded into names, aliases qualified), so schemas that differ only in how they spell
names get one id.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fastavro.schema import parse_schema

from .errors import invalid_schema

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
NAMED = frozenset({"record", "error", "enum", "fixed"})
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_TYPE_KEY_ORDER = (
    "type", "name", "namespace", "doc", "aliases", "fields", "symbols", "items", "values",
    "size", "logicalType", "precision", "scale", "default",
)  # fmt: skip
_FIELD_KEY_ORDER = ("name", "type", "doc", "default", "order", "aliases")
_INT_RANGE = (-(2**31), 2**31 - 1)
_LONG_RANGE = (-(2**63), 2**63 - 1)


@dataclass(frozen=True)
class AvroSchema:
    """A parsed schema: fastavro's resolved form plus every named type it can see."""

    text: str
    parsed: Any
    named: Mapping[str, Any] = field(repr=False)


def parse(text: str, references: Sequence[AvroSchema] = (), normalize: bool = False) -> AvroSchema:
    """Parse schema text that may use named types from `references`; 42201 if invalid."""
    try:
        raw = json.loads(text)
    except (json.JSONDecodeError, TypeError, RecursionError) as exc:
        raise invalid_schema(f"not valid JSON: {exc}") from exc
    named: dict[str, Any] = {}
    for reference in references:
        named.update(reference.named)
    _Structure(set(named)).check(raw, "")
    try:
        parsed = parse_schema(raw, named_schemas=named, _write_hint=False)
    except Exception as exc:  # fastavro raises several unrelated exception types
        kind = type(exc).__name__
        reason = f"Unknown type {exc}" if kind == "UnknownType" else f"{kind}: {exc}"
        raise invalid_schema(reason) from exc
    _check_defaults(parsed, named)
    canonical = render(parsed, qualify=True) if normalize else render(raw, qualify=False)
    return AvroSchema(text=canonical, parsed=parsed, named=named)


def render(schema: Any, qualify: bool) -> str:
    return json.dumps(_ordered(schema, qualify, ""), separators=(",", ":"), ensure_ascii=False)


def _ordered(schema: Any, qualify: bool, namespace: str) -> Any:
    if isinstance(schema, list):
        return [_ordered(branch, qualify, namespace) for branch in schema]
    if not isinstance(schema, dict):
        return schema
    kind = schema.get("type")
    if isinstance(kind, str) and kind in PRIMITIVES and len(schema) == 1:
        return kind
    if kind in NAMED:
        namespace = _namespace_of(schema, namespace)
    out: dict[str, Any] = {}
    for key in _key_order(schema, _TYPE_KEY_ORDER):
        value = schema[key]
        if key in ("type", "items", "values"):
            value = _ordered(value, qualify, namespace)
        elif key == "fields":
            value = [_ordered_field(f, qualify, namespace) for f in value]
        elif key == "aliases" and qualify and kind in NAMED:
            value = [_qualify(alias, namespace) for alias in value]
        elif key == "namespace" and qualify:
            continue
        out[key] = value
    return out


def _ordered_field(schema: dict[str, Any], qualify: bool, namespace: str) -> dict[str, Any]:
    return {
        key: _ordered(schema[key], qualify, namespace) if key == "type" else schema[key]
        for key in _key_order(schema, _FIELD_KEY_ORDER)
    }


def _key_order(schema: dict[str, Any], known: tuple[str, ...]) -> list[str]:
    return [k for k in known if k in schema] + sorted(k for k in schema if k not in known)


def _namespace_of(schema: dict[str, Any], enclosing: str) -> str:
    name = schema.get("name", "")
    if isinstance(name, str) and "." in name:
        return name.rsplit(".", 1)[0]
    namespace = schema.get("namespace")
    return namespace if isinstance(namespace, str) else enclosing


def _qualify(name: str, namespace: str) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


class _Structure:
    """The specification's structural rules that fastavro does not enforce."""

    def __init__(self, known_names: set[str]) -> None:
        self.known = known_names

    def check(self, schema: Any, namespace: str) -> None:
        if isinstance(schema, str):
            return
        if isinstance(schema, list):
            self._union(schema, namespace)
        elif isinstance(schema, dict):
            self._object(schema, namespace)
        else:
            raise invalid_schema(f"{json.dumps(schema)} is not a schema")

    def _union(self, branches: list[Any], namespace: str) -> None:
        seen: set[str] = set()
        for branch in branches:
            if isinstance(branch, list):
                raise invalid_schema("Unions may not immediately contain other unions")
            key = self._branch_key(branch, namespace)
            if key in seen:
                raise invalid_schema(f"Duplicate in union: {key}")
            seen.add(key)
            self.check(branch, namespace)

    def _branch_key(self, branch: Any, namespace: str) -> str:
        kind = branch.get("type") if isinstance(branch, dict) else branch
        if isinstance(branch, dict) and kind in NAMED:
            return _qualify(str(branch.get("name")), _namespace_of(branch, namespace))
        if isinstance(kind, str) and kind not in PRIMITIVES and kind not in ("array", "map"):
            return _qualify(kind, namespace)
        return str(kind)

    def _object(self, schema: dict[str, Any], namespace: str) -> None:
        kind = schema.get("type")
        if not isinstance(kind, str):
            raise invalid_schema(f"No type or a non-string type in {json.dumps(schema)}")
        if kind in NAMED:
            self._name(schema, "name")
            namespace = _namespace_of(schema, namespace)
            for part in namespace.split(".") if namespace else ():
                self._check_name(part, "namespace")
        if kind in ("record", "error"):
            self._fields(schema, namespace)
        elif kind == "enum":
            symbols = schema.get("symbols")
            if not isinstance(symbols, list):
                raise invalid_schema(f"Enum {schema['name']} has no symbols list")
            for symbol in symbols:
                self._check_name(symbol, "enum symbol")
        elif kind == "fixed":
            size = schema.get("size")
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise invalid_schema(f"Fixed {schema['name']} needs a non-negative integer size")
        elif kind == "array":
            self._required(schema, "items", namespace)
        elif kind == "map":
            self._required(schema, "values", namespace)

    def _fields(self, schema: dict[str, Any], namespace: str) -> None:
        fields = schema.get("fields")
        if not isinstance(fields, list):
            raise invalid_schema(f"Record {schema['name']} has no fields list")
        names: set[str] = set()
        for item in fields:
            if not isinstance(item, dict) or "type" not in item:
                raise invalid_schema(f"Record {schema['name']} has a field without a type")
            self._name(item, "field name")
            if item["name"] in names:
                raise invalid_schema(f"Duplicate field {item['name']} in record {schema['name']}")
            names.add(item["name"])
            self.check(item["type"], namespace)

    def _required(self, schema: dict[str, Any], key: str, namespace: str) -> None:
        if key not in schema:
            raise invalid_schema(f"{schema['type']} has no {key}")
        self.check(schema[key], namespace)

    def _name(self, schema: dict[str, Any], what: str) -> None:
        name = schema.get("name")
        if not isinstance(name, str):
            raise invalid_schema(f"No {what} in {json.dumps(schema)}")
        for part in name.split(".") if what != "field name" else [name]:
            self._check_name(part, what)

    @staticmethod
    def _check_name(name: Any, what: str) -> None:
        if not isinstance(name, str) or not _NAME.match(name):
            raise invalid_schema(f"Illegal {what}: {json.dumps(name)}")


def _check_defaults(schema: Any, named: Mapping[str, Any]) -> None:
    for record in _records(schema, named):
        for item in record["fields"]:
            if "default" in item and not default_matches(item["type"], item["default"], named):
                raise invalid_schema(
                    f"Invalid default for field {item['name']}: {json.dumps(item['default'])} "
                    f"not a {render(item['type'], qualify=True)}"
                )


def _records(schema: Any, named: Mapping[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    pending = [schema]
    while pending:
        node = pending.pop()
        if isinstance(node, list):
            pending.extend(node)
        elif isinstance(node, dict):
            if node.get("type") in ("record", "error"):
                found.append(node)
                pending.extend(f["type"] for f in node["fields"])
            pending.extend(node[k] for k in ("items", "values") if k in node)
    return found


def resolve(schema: Any, named: Mapping[str, Any]) -> Any:
    """Follow a reference to a named type; `{"type": "int"}` becomes `"int"`."""
    if isinstance(schema, str):
        return schema if schema in PRIMITIVES else named[schema]
    if isinstance(schema, dict) and schema["type"] in PRIMITIVES and "logicalType" not in schema:
        return schema["type"]
    return schema


def type_of(schema: Any) -> str:
    """'union', a primitive name, or a complex type name; schema must be resolved."""
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, str):
        return schema
    kind = str(schema["type"])
    return "record" if kind == "error" else kind


def default_matches(schema: Any, value: Any, named: Mapping[str, Any]) -> bool:
    schema = resolve(schema, named)
    kind = type_of(schema)
    if kind == "union":
        return bool(schema) and default_matches(schema[0], value, named)
    if kind in PRIMITIVES:
        return _primitive_matches(kind, value)
    if kind == "record":
        return isinstance(value, dict) and all(
            default_matches(f["type"], value[f["name"]], named) if f["name"] in value
            else "default" in f
            for f in schema["fields"]
        )  # fmt: skip
    if kind == "enum":
        return isinstance(value, str) and value in schema["symbols"]
    if kind == "fixed":
        return isinstance(value, str) and len(value) == schema["size"]
    if kind == "array":
        return isinstance(value, list) and all(
            default_matches(schema["items"], v, named) for v in value
        )
    if kind == "map":
        return isinstance(value, dict) and all(
            default_matches(schema["values"], v, named) for v in value.values()
        )
    return False


def _primitive_matches(kind: str, value: Any) -> bool:
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind in ("int", "long"):
        low, high = _INT_RANGE if kind == "int" else _LONG_RANGE
        return isinstance(value, int) and low <= value <= high
    if kind in ("float", "double"):
        return isinstance(value, int | float)
    return isinstance(value, str)  # bytes and string defaults are JSON strings
