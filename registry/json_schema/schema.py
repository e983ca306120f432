"""JSON Schema documents: validated against their draft's metaschema, `$ref`s resolved.

The draft is the one `$schema` names (4, 6, 7, 2019-09 or 2020-12), draft 7 when it names
none or one we do not know, as confluent-kafka's serializer assumes. A reference's `name`
is the URL the schema's `$ref`s use for it (`"customer.schema.json"`, or an absolute
`http://...`); the referenced schema is registered under that URL in a `referencing`
registry, with everything it references in turn, so `$ref`s into it (fragments included)
resolve as a validator would resolve them. Every `$ref` must resolve, and a chain of
`$ref`s that comes back to itself is refused, when the schema is registered.

The canonical text is the document as compact JSON, its keys in the order given;
`normalize` sorts the keys.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

# jsonschema (below) ships no types; its stubs stay out, as the OpenAPI test imports it untyped
import referencing
import referencing.exceptions
import referencing.jsonschema
from jsonschema import Draft7Validator  # type: ignore[import-untyped]
from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped]
from jsonschema.protocols import Validator  # type: ignore[import-untyped]
from jsonschema.validators import validator_for  # type: ignore[import-untyped]

from registry.errors import invalid_schema
from registry.parsed import Resolved

MAX_REF_CHAIN = 64
MAX_DEPTH = 64  # of objects and arrays: the checks recurse a few frames a level


@dataclass(frozen=True)
class JsonSchema:
    text: str
    parsed: Any  # the document: a dict, or a boolean schema
    validator: type[Validator] = field(repr=False)
    registry: referencing.Registry[Any] = field(repr=False)
    base_uri: str = ""

    def resolver(self) -> referencing._core.Resolver[Any]:
        return self.registry.resolver(base_uri=self.base_uri)


def parse(text: str, references: Sequence[Resolved], normalize: bool) -> JsonSchema:
    try:
        document = json.loads(text)
    except (json.JSONDecodeError, TypeError, RecursionError) as exc:
        raise invalid_schema(f"not valid JSON: {exc}") from exc
    if not isinstance(document, dict | bool):
        kind = type(document).__name__
        raise invalid_schema(f"a JSON Schema is an object or a boolean, not {kind}")
    if _depth(document) > MAX_DEPTH:
        raise invalid_schema(f"the schema nests deeper than {MAX_DEPTH} levels")
    if isinstance(document, dict) and not isinstance(document.get("$schema", ""), str):
        raise invalid_schema("$schema is not a string")
    validator = _validator_class(document)
    try:
        validator.check_schema(document)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "the root"
        raise invalid_schema(f"at {where}: {exc.message}") from exc
    registry = _registry(document, validator, references)
    base = document.get("$id", document.get("id", "")) if isinstance(document, dict) else ""
    schema = JsonSchema(
        text=json.dumps(document, separators=(",", ":"), ensure_ascii=False, sort_keys=normalize),
        parsed=document,
        validator=validator,
        registry=registry,
        base_uri=base if isinstance(base, str) else "",
    )
    _check_refs(schema)
    return schema


def _depth(document: Any) -> int:
    deepest, pending = 0, [(document, 1)]
    while pending:
        node, depth = pending.pop()
        deepest = max(deepest, depth)
        if deepest > MAX_DEPTH:
            break
        children = node.values() if isinstance(node, dict) else node if isinstance(
            node, list) else ()
        pending.extend((child, depth + 1) for child in children
                       if isinstance(child, dict | list))
    return deepest


def _validator_class(document: Any) -> type[Validator]:
    found: type[Validator] = validator_for(document, default=Draft7Validator)
    return found


def _registry(
    document: Any, validator: type[Validator], references: Sequence[Resolved]
) -> referencing.Registry[Any]:
    specification = referencing.jsonschema.specification_with(
        validator.META_SCHEMA.get("$schema", ""), default=referencing.jsonschema.DRAFT7
    )
    registry: referencing.Registry[Any] = referencing.Registry()
    for reference in references:
        if not isinstance(reference.schema, JsonSchema):
            raise invalid_schema(f"reference {reference.name} is not a JSON schema")
        registry = registry.combine(reference.schema.registry)
        registry = registry.with_resource(
            reference.name, _resource(reference.schema.parsed, specification))
    root = _resource(document, specification)
    registry = registry.with_resource("", root)
    base = root.id()
    if base:
        registry = registry.with_resource(base, root)
    return registry.crawl()


def _resource(document: Any, default: referencing.Specification[Any]) -> referencing.Resource[Any]:
    return referencing.jsonschema.specification_with(
        document.get("$schema", "") if isinstance(document, dict) else "", default=default
    ).create_resource(document)


def _check_refs(schema: JsonSchema) -> None:
    """Every `$ref` resolves, and no chain of `$ref`s comes back to where it started."""
    resolver = schema.resolver()
    for ref in _refs(schema.parsed):
        current, here, seen = ref, resolver, set[int]()
        while True:
            try:
                resolved = here.lookup(current)
            except referencing.exceptions.Unresolvable as exc:
                raise invalid_schema(f"$ref {current!r} does not resolve: no reference or "
                                     "definition of that name") from exc
            target = resolved.contents
            if not (isinstance(target, dict) and isinstance(target.get("$ref"), str)):
                break
            if id(target) in seen or len(seen) > MAX_REF_CHAIN:
                raise invalid_schema(f"circular reference: $ref {ref!r} comes back to itself")
            seen.add(id(target))
            current, here = target["$ref"], resolved.resolver


def _refs(node: Any) -> Iterator[str]:
    pending = [node]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            ref = item.get("$ref")
            if isinstance(ref, str):
                yield ref
            pending.extend(v for k, v in item.items() if k not in ("enum", "const", "default",
                                                                   "examples"))
        elif isinstance(item, list):
            pending.extend(item)
