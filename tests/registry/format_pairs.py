"""Generated JSON Schema schema pairs whose verdicts follow from how they were made (and, in
`proto_pairs.py`, Protobuf ones).

Each pair is a random base schema and a copy changed by one *evolution*: a named change
with the verdict the published rules give it in each direction (backward: the changed
schema reads data written with the base; forward: the base reads the changed schema's
data). Bases vary in size, types, constraints, nesting and content model, and the change
lands on a random member, so one evolution is met in many surroundings.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

JSON_SCALARS = ["string", "integer", "number", "boolean"]


@dataclass(frozen=True)
class Pair:
    rule: str
    old: Any
    new: Any
    backward: bool
    forward: bool



# ---- JSON Schema -----------------------------------------------------------------------

def _json_scalar(rng: random.Random) -> dict[str, Any]:
    kind = rng.choice(JSON_SCALARS)
    schema: dict[str, Any] = {"type": kind}
    if kind == "string" and rng.random() < 0.4:
        schema["maxLength"] = rng.randint(5, 50)
    if kind in ("integer", "number") and rng.random() < 0.4:
        schema["minimum"] = rng.randint(-10, 10)
    if rng.random() < 0.2:
        schema["description"] = "a field"
    return schema


def _json_object(rng: random.Random, depth: int, model: str) -> dict[str, Any]:
    properties = {f"p{i}": _json_scalar(rng) for i in range(rng.randint(2, 6))}
    if depth == 0:
        properties["inner"] = _json_object(rng, 1, rng.choice(["open", "closed"]))
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    required = [name for name in properties if rng.random() < 0.3]
    if required:
        schema["required"] = required
    if model == "closed":
        schema["additionalProperties"] = False
    elif model == "partial":
        schema["additionalProperties"] = {"type": "string"}
    return schema


def _target(rng: random.Random, schema: dict[str, Any]) -> dict[str, Any]:
    """The object the change lands in: the root or its nested object."""
    return schema["properties"]["inner"] if rng.random() < 0.4 else schema


def _pick(rng: random.Random, obj: dict[str, Any], kind: str | None = None) -> str | None:
    names = [n for n, s in obj["properties"].items()
             if n != "inner" and (kind is None or s.get("type") == kind)]
    return rng.choice(names) if names else None


def _with_scalar(kind: str) -> Callable[[random.Random, dict[str, Any]], str]:
    def ensure(rng: random.Random, obj: dict[str, Any]) -> str:
        name = _pick(rng, obj, kind)
        if name is None:
            name = "k0"
            obj["properties"][name] = {"type": kind}
        return name

    return ensure


JsonChange = Callable[[random.Random, dict[str, Any], dict[str, Any]], None]


def _prop_change(kind: str | None, change: Callable[[dict[str, Any]], None],
                 before: Callable[[dict[str, Any]], None] | None = None) -> JsonChange:
    """`change` a property of type `kind` in the new schema (after `before` on both)."""
    def apply(rng: random.Random, old: dict[str, Any], new: dict[str, Any]) -> None:
        target_old = _target(rng, old)
        name = _with_scalar(kind)(rng, target_old) if kind else _pick(rng, target_old)
        assert name is not None
        if before is not None:
            before(target_old["properties"][name])
        path = [] if target_old is old else ["inner"]
        target_new = new
        for step in path:
            target_new = target_new["properties"][step]
        target_new["properties"][name] = copy.deepcopy(target_old["properties"][name])
        change(target_new["properties"][name])

    return apply


def _object_change(setup: Callable[[dict[str, Any]], None] | None,
                   change: Callable[[dict[str, Any]], None]) -> JsonChange:
    """`setup` runs on both sides (the base's shape), `change` on the new side only."""
    def apply(rng: random.Random, old: dict[str, Any], new: dict[str, Any]) -> None:
        inner = rng.random() < 0.4
        for side in (old, new):
            obj = side["properties"]["inner"] if inner else side
            if setup is not None:
                setup(obj)
        change(new["properties"]["inner"] if inner else new)

    return apply


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(schema: dict[str, Any]) -> None:
        schema[key] = value
    return apply


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    def apply(schema: dict[str, Any]) -> None:
        schema.pop(key, None)
    return apply


def _both(*steps: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def apply(schema: dict[str, Any]) -> None:
        for step in steps:
            step(schema)
    return apply


def _add_property(schema: Any, required: bool = False, default: bool = False
                  ) -> Callable[[dict[str, Any]], None]:
    def apply(obj: dict[str, Any]) -> None:
        obj["properties"]["added"] = copy.deepcopy(schema)
        if default:
            obj["properties"]["added"]["default"] = 0
        if required:
            obj["required"] = [*obj.get("required", []), "added"]
    return apply


def _require_existing(obj: dict[str, Any]) -> None:
    name = next(n for n in obj["properties"] if n not in obj.get("required", ()))
    obj["required"] = [*obj.get("required", []), name]


def _unrequire(obj: dict[str, Any]) -> None:
    obj["required"] = obj.get("required", [])[1:]


def _ensure_required(obj: dict[str, Any]) -> None:
    if not obj.get("required"):
        obj["required"] = [next(iter(obj["properties"]))]


def _ensure_free(obj: dict[str, Any]) -> None:
    """At least one property that is not required."""
    obj["properties"]["free"] = {"type": "string"}


def _member(schema: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> JsonChange:
    """A property `member` of `schema` on both sides, then `change` it on the new side."""
    def setup(obj: dict[str, Any]) -> None:
        obj["properties"]["member"] = copy.deepcopy(schema)

    def changed(obj: dict[str, Any]) -> None:
        change(obj["properties"]["member"])

    return _object_change(setup, changed)


def _append(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(schema: dict[str, Any]) -> None:
        schema[key] = [*schema[key], value]
    return apply


def _pop_last(key: str) -> Callable[[dict[str, Any]], None]:
    def apply(schema: dict[str, Any]) -> None:
        schema[key] = schema[key][:-1]
    return apply


ARRAY = {"type": "array", "items": {"type": "integer"}, "maxItems": 5}
TUPLE = {"type": "array", "items": [{"type": "string"}, {"type": "integer"}],
         "additionalItems": False}
PREFIX_TUPLE = {"type": "array", "prefixItems": [{"type": "string"}], "items": False}
ALL_OF = {"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}},
                    {"type": "object", "required": ["a"]}]}
ONE_OF = {"oneOf": [{"type": "string"}, {"type": "integer"}]}

# (rule, change, backward, forward)
JSON_EVOLUTIONS: list[tuple[str, JsonChange, bool, bool]] = [
    ("max length raised",
     _prop_change("string", _set("maxLength", 1000), _set("maxLength", 10)), True, False),
    ("pattern added", _prop_change("string", _set("pattern", "^a")), False, True),
    ("integer widened to number", _prop_change("integer", _set("type", "number")), True, False),
    ("string became integer", _prop_change("string", _set("type", "integer")), False, False),
    ("type list extended", _prop_change("string", _set("type", ["string", "null"])), True,
     False),
    ("enum extended", _prop_change("string", _set("enum", ["a", "b", "c"]),
                                   _both(_set("enum", ["a", "b"]), _drop("maxLength"))),
     True, False),
    ("minimum lowered", _prop_change("integer", _set("minimum", -1000), _set("minimum", 0)),
     True, False),
    ("maximum added", _prop_change("number", _set("maximum", 10)), False, True),
    ("multipleOf divided",
     _prop_change("integer", _set("multipleOf", 5), _set("multipleOf", 10)), True, False),
    ("title changed", _prop_change(None, _set("title", "renamed")), True, True),
    ("wrapped in anyOf with null",
     _prop_change(None, lambda s: s.update({"anyOf": [{"type": s.pop("type")},
                                                      {"type": "null"}]})), True, False),
    ("property added to open model",
     _object_change(_drop("additionalProperties"), _add_property({"type": "string"})), False,
     True),
    ("property with empty schema added to open model",
     _object_change(_drop("additionalProperties"), _add_property({})), True, True),
    ("optional property added to closed model",
     _object_change(_set("additionalProperties", False), _add_property({"type": "integer"})),
     True, False),
    ("required property added to closed model",
     _object_change(_set("additionalProperties", False),
                    _add_property({"type": "integer"}, required=True)), False, False),
    ("required property with default added to closed model",
     _object_change(_set("additionalProperties", False),
                    _add_property({"type": "integer"}, required=True, default=True)), True,
     False),
    ("covered property added to partially open model",
     _object_change(_set("additionalProperties", {"type": "string"}),
                    _add_property({"type": "string"})), True, True),
    ("uncovered property added to partially open model",
     _object_change(_set("additionalProperties", {"type": "string"}),
                    _add_property({"type": "integer"})), False, False),
    ("closed model opened",
     _object_change(_set("additionalProperties", False), _drop("additionalProperties")),
     True, False),
    ("existing property required", _object_change(_ensure_free, _require_existing), False,
     True),
    ("requirement dropped", _object_change(_ensure_required, _unrequire), True, False),
    ("max properties added", _object_change(None, _set("maxProperties", 3)), False, True),
    ("max items raised", _member(ARRAY, _set("maxItems", 50)), True, False),
    ("unique items added", _member(ARRAY, _set("uniqueItems", True)), False, True),
    ("array items widened", _member(ARRAY, _set("items", {"type": "number"})), True, False),
    ("array items changed", _member(ARRAY, _set("items", {"type": "string"})), False, False),
    ("item added to a closed tuple", _member(TUPLE, _append("items", {"type": "boolean"})),
     True, False),
    ("tuple opened", _member(TUPLE, _drop("additionalItems")), True, False),
    ("item added to a closed prefixItems tuple",
     _member(PREFIX_TUPLE, _append("prefixItems", {"type": "integer"})), True, False),
    ("allOf branch dropped", _member(ALL_OF, _pop_last("allOf")), True, False),
    ("oneOf branch added", _member(ONE_OF, _append("oneOf", {"type": "null"})), True, False),
    ("oneOf branch changed", _member(ONE_OF, lambda s: s.update(
        oneOf=[{"type": "string"}, {"type": "boolean"}])), False, False),
    ("nothing but key order",
     _object_change(None, lambda o: o.update(dict(reversed(list(o.items()))))), True, True),
]


def json_pair(seed: int) -> Pair:
    rng = random.Random(seed)
    rule, change, backward, forward = JSON_EVOLUTIONS[seed % len(JSON_EVOLUTIONS)]
    old = _json_object(rng, 0, rng.choice(["open", "closed", "partial"]))
    if rng.random() < 0.3:
        old["$schema"] = rng.choice(["http://json-schema.org/draft-07/schema#",
                                     "https://json-schema.org/draft/2020-12/schema"])
        if "tuple" in rule:  # 2020-12 writes tuples as prefixItems
            old["$schema"] = "http://json-schema.org/draft-04/schema#"
    if "prefixItems" in rule:
        old["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    new = copy.deepcopy(old)
    change(rng, old, new)
    return Pair(rule, old, new, backward, forward)
