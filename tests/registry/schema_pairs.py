"""Hypothesis strategies for correlated Avro (reader, writer) schema pairs.

Independent random schemas are almost never compatible, so each pair is drawn together:
the two sides share a skeleton and differ by the changes schema evolution makes (fields
added or removed with or without defaults, promotions, enum symbols and defaults, fixed
sizes, renames with and without aliases, union branches gained or lost).

Constrained away from the reference checker's known deviations from the specification
(see registry/README.md): aliased names are given an explicit empty namespace, and two
decimals in a pair always share precision and scale.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import strategies as st

PRIMITIVE_NAMES = ["null", "boolean", "int", "long", "float", "double", "bytes", "string"]
PROMOTABLE = {
    "int": ["long", "float", "double"],
    "long": ["float", "double", "int"],
    "float": ["double", "int"],
    "double": ["float", "long"],
    "string": ["bytes"],
    "bytes": ["string"],
}
LOGICAL = [
    {"type": "int", "logicalType": "date"},
    {"type": "long", "logicalType": "timestamp-millis"},
    {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2},
    {"type": "string", "logicalType": "uuid"},
]
Pair = tuple[Any, Any]


def default_for(schema: Any) -> Any:
    if isinstance(schema, list):
        return default_for(schema[0])
    kind = schema if isinstance(schema, str) else schema["type"]
    simple = {"null": None, "boolean": True, "int": 1, "long": 2, "float": 1.5,
              "double": 2.5, "bytes": "b", "string": "s"}  # fmt: skip
    if kind in simple:
        return simple[kind]
    if kind == "enum":
        return schema["symbols"][0]
    if kind == "fixed":
        return "f" * schema["size"]
    if kind == "record":
        return {f["name"]: default_for(f["type"]) for f in schema["fields"]}
    return [] if kind == "array" else {}


def _key(schema: Any) -> str:
    if isinstance(schema, str):
        return schema
    if schema["type"] in ("record", "enum", "fixed"):
        return str(schema.get("namespace", "")) + "." + str(schema["name"])
    return str(schema["type"])


@st.composite
def schema_pairs(draw: st.DrawFn, max_depth: int = 3) -> Pair:
    counter = itertools.count()
    return _pair(draw, counter, max_depth)


def _pair(draw: st.DrawFn, counter: Any, depth: int) -> Pair:
    kinds = ["primitive", "logical"]
    if depth > 0:
        kinds += ["record", "record", "enum", "fixed", "array", "map", "union", "union"]
    kind = draw(st.sampled_from(kinds))
    if kind == "primitive":
        a = draw(st.sampled_from(PRIMITIVE_NAMES))
        b = draw(st.sampled_from([a, a, *PROMOTABLE.get(a, []), *PRIMITIVE_NAMES]))
        return a, b
    if kind == "logical":
        logical: dict[str, Any] = draw(st.sampled_from(LOGICAL))
        underlying = str(logical["type"])
        return logical, draw(st.sampled_from([logical, underlying, *PROMOTABLE[underlying]]))
    if kind in ("array", "map"):
        key = "items" if kind == "array" else "values"
        inner_a, inner_b = _pair(draw, counter, depth - 1)
        return {"type": kind, key: inner_a}, {"type": kind, key: inner_b}
    if kind == "union":
        return _union_pair(draw, counter, depth)
    return _named_pair(draw, counter, depth, kind)


def _union_pair(draw: st.DrawFn, counter: Any, depth: int) -> Pair:
    branches = [_pair(draw, counter, depth - 1) for _ in range(draw(st.integers(1, 4)))]
    a = [x for x, _ in branches if draw(st.integers(0, 4))] or [branches[0][0]]
    b = [y for _, y in branches if draw(st.integers(0, 4))] or [branches[0][1]]
    # Unions inside the union are flattened; a single branch stays a union sometimes.
    return _flatten(a), _flatten(b)


def _flatten(schema: Any) -> Any:
    if not isinstance(schema, list):
        return schema
    flat = [branch for item in schema for branch in (item if isinstance(item, list) else [item])]
    return _dedupe(flat)


def _dedupe(branches: list[Any]) -> list[Any]:
    seen: set[str] = set()
    out = []
    for branch in branches:
        if _key(branch) not in seen:
            seen.add(_key(branch))
            out.append(branch)
    return out


def _names(draw: st.DrawFn, counter: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    base = f"N{next(counter)}"
    a: dict[str, Any] = {"name": base}
    change = draw(st.sampled_from(["same", "same", "same", "rename", "alias", "namespace"]))
    if change == "rename":
        return a, {"name": f"M{base}"}
    if change == "alias":
        # An explicit empty namespace keeps the alias from being read relative to an
        # enclosing namespace, where the reference checker departs from the specification.
        return a, {"name": f"M{base}", "namespace": "", "aliases": [base]}
    if change == "namespace":
        return a, {"name": base, "namespace": "ns.other"}
    return a, dict(a)


def _named_pair(draw: st.DrawFn, counter: Any, depth: int, kind: str) -> Pair:
    names_a, names_b = _names(draw, counter)
    if draw(st.booleans()):
        names_a, names_b = names_b, names_a
    if kind == "fixed":
        size = draw(st.integers(1, 4))
        other = draw(st.sampled_from([size, size, size + 1]))
        return {"type": "fixed", **names_a, "size": size}, {
            "type": "fixed",
            **names_b,
            "size": other,
        }
    if kind == "enum":
        return _enum_pair(draw, names_a, names_b)
    fields = []
    for index in range(draw(st.integers(0, 4))):
        x, y = _pair(draw, counter, depth - 1)
        presence = draw(st.sampled_from(["both", "both", "both", "a", "b"]))
        fa = {"name": f"f{index}", "type": x}
        fb = {"name": f"f{index}", "type": y}
        for side, f in (("a", fa), ("b", fb)):
            if draw(st.integers(0, 2)) == 0:
                f["default"] = default_for(f["type"])
            if side == "b" and presence == "b" and draw(st.booleans()):
                f["name"] = f"g{index}"
                f["aliases"] = [f"f{index}"]
        fields.append((presence, fa, fb))
    a = {"type": "record", **names_a, "fields": [fa for p, fa, _ in fields if p != "b"]}
    b = {"type": "record", **names_b, "fields": [fb for p, _, fb in fields if p != "a"]}
    return a, b


def _enum_pair(draw: st.DrawFn, names_a: dict[str, Any], names_b: dict[str, Any]) -> Pair:
    pool = ["A", "B", "C", "D"]
    sa = draw(st.lists(st.sampled_from(pool), min_size=1, unique=True))
    sb = draw(st.lists(st.sampled_from(pool), min_size=1, unique=True))
    a: dict[str, Any] = {"type": "enum", **names_a, "symbols": sa}
    b: dict[str, Any] = {"type": "enum", **names_b, "symbols": sb}
    for side in (a, b):
        if draw(st.booleans()):
            side["default"] = side["symbols"][0]
    return a, b
