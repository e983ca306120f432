"""JSON Schema compatibility by Confluent's published rules, our own implementation.

`reader_incompatibilities(reader, writer)` walks the writer's schema (the *original*, what
data was written with) beside the reader's (the *update*), names every difference by
Confluent's names (`TYPE_NARROWED`, `PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL`, ...), and keeps
the ones outside the compatible set: a change is compatible when every document valid
under the original is still valid under the update.

Objects have a *content model*: open (`additionalProperties` absent or true, no
`patternProperties`), closed (`additionalProperties: false`) or partially open
(`patternProperties`, or `additionalProperties` a schema). A property added to an open
model is incompatible unless its schema is empty (old data may hold anything under that
name); to a closed one it is compatible unless it is required without a default; in a
partially open model it is compatible when the schema that covered the name before is
compatible with the new one. Removal mirrors that. Arrays given as tuples follow the same
models with `additionalItems` (`items` after `prefixItems` in 2020-12).

Constraints follow the direction that accepts more: raising a maximum, lowering a minimum,
removing a pattern, dividing `multipleOf` are compatible; adding any constraint is not.
`anyOf`/`oneOf` may gain branches, `allOf` may lose them; branches are paired by
compatibility. `$ref`s are followed (a pair already under comparison is assumed
compatible, so recursive schemas end).
"""

from __future__ import annotations

from typing import Any

from registry.compatibility import Incompatibility

from .members import Arrays, Objects
from .nodes import Side, is_empty, normal
from .schema import JsonSchema

COMPATIBLE = frozenset({
    "ID_CHANGED", "DESCRIPTION_CHANGED", "TITLE_CHANGED", "DEFAULT_CHANGED", "SCHEMA_REMOVED",
    "TYPE_EXTENDED",
    "MAX_LENGTH_INCREASED", "MAX_LENGTH_REMOVED", "MIN_LENGTH_DECREASED", "MIN_LENGTH_REMOVED",
    "PATTERN_REMOVED",
    "MAXIMUM_INCREASED", "MAXIMUM_REMOVED", "MINIMUM_DECREASED", "MINIMUM_REMOVED",
    "EXCLUSIVE_MAXIMUM_INCREASED", "EXCLUSIVE_MAXIMUM_REMOVED",
    "EXCLUSIVE_MINIMUM_DECREASED", "EXCLUSIVE_MINIMUM_REMOVED",
    "MULTIPLE_OF_REDUCED", "MULTIPLE_OF_REMOVED",
    "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED", "REQUIRED_ATTRIBUTE_REMOVED",
    "DEPENDENCY_ARRAY_NARROWED", "DEPENDENCY_ARRAY_REMOVED", "DEPENDENCY_SCHEMA_REMOVED",
    "MAX_PROPERTIES_INCREASED", "MAX_PROPERTIES_REMOVED",
    "MIN_PROPERTIES_DECREASED", "MIN_PROPERTIES_REMOVED",
    "ADDITIONAL_PROPERTIES_ADDED", "ADDITIONAL_PROPERTIES_EXTENDED",
    "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
    "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL",
    "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
    "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
    "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL",
    "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "MAX_ITEMS_INCREASED", "MAX_ITEMS_REMOVED", "MIN_ITEMS_DECREASED", "MIN_ITEMS_REMOVED",
    "UNIQUE_ITEMS_REMOVED", "ADDITIONAL_ITEMS_ADDED", "ADDITIONAL_ITEMS_EXTENDED",
    "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL",
    "ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL",
    "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "ENUM_ARRAY_EXTENDED", "COMBINED_TYPE_EXTENDED", "PRODUCT_TYPE_NARROWED",
    "SUM_TYPE_EXTENDED", "NOT_TYPE_NARROWED", "NOT_TYPE_REMOVED",
})  # fmt: skip
COMBINATORS = ("allOf", "anyOf", "oneOf")
ALL_TYPES = frozenset({"null", "boolean", "object", "array", "number", "integer", "string"})
# Keywords that only constrain values of one type.
UPPER_BOUNDS = {"maximum": "MAXIMUM", "exclusiveMaximum": "EXCLUSIVE_MAXIMUM",
                "maxLength": "MAX_LENGTH", "maxItems": "MAX_ITEMS",
                "maxProperties": "MAX_PROPERTIES"}
LOWER_BOUNDS = {"minimum": "MINIMUM", "exclusiveMinimum": "EXCLUSIVE_MINIMUM",
                "minLength": "MIN_LENGTH", "minItems": "MIN_ITEMS",
                "minProperties": "MIN_PROPERTIES"}


def reader_incompatibilities(reader: JsonSchema, writer: JsonSchema) -> list[Incompatibility]:
    differ = _Differ()
    differ.compare(Side(writer.parsed, writer.resolver()), Side(reader.parsed, reader.resolver()),
                   "#")
    return [d for d in differ.found if d.error_type not in COMPATIBLE]


def differences(reader: JsonSchema, writer: JsonSchema) -> list[Incompatibility]:
    """Every difference, compatible ones too (for tests and verbose tools)."""
    differ = _Differ()
    differ.compare(Side(writer.parsed, writer.resolver()), Side(reader.parsed, reader.resolver()),
                   "#")
    return differ.found


def _types(node: dict[str, Any]) -> frozenset[str]:
    kind = node.get("type")
    if kind is None:
        return ALL_TYPES
    kinds = frozenset([kind] if isinstance(kind, str) else kind)
    return kinds | {"integer"} if "number" in kinds else kinds


def _describe(kind: str, path: str) -> str:
    words = kind.lower().replace("_", " ")
    compatible = "compatible" if kind in COMPATIBLE else "incompatible"
    return f"{words} at path '{path}' ({compatible})"


class _Differ:
    def __init__(self) -> None:
        self.found: list[Incompatibility] = []
        self.active: set[tuple[int, int]] = set()

    def add(self, kind: str, path: str, info: str = "") -> None:
        self.found.append(Incompatibility(kind, path, _describe(kind, path), info or path))

    def incompatible(self, original: Side, update: Side, path: str) -> bool:
        """Whether `update` fails to read `original` (a trial run, nothing recorded)."""
        trial = _Differ()
        trial.active = set(self.active)
        trial.compare(original, update, path)
        return any(d.error_type not in COMPATIBLE for d in trial.found)

    def compare(self, original: Side, update: Side, path: str) -> None:
        original, update = original.deref(), update.deref()
        key = (id(original.node), id(update.node))
        if key in self.active:
            return
        self.active.add(key)
        try:
            self._compare(original.child(normal(original.node)),
                          update.child(normal(update.node)), path)
        finally:
            self.active.discard(key)

    def _compare(self, original: Side, update: Side, path: str) -> None:
        o, u = original.node, update.node
        if not isinstance(o, dict) or not isinstance(u, dict) or o == u:
            return
        if is_empty(u):
            if not is_empty(o):
                self.add("TYPE_EXTENDED", path)
            return
        if self._combined(original, update, path):
            return
        self._metadata(o, u, path)
        self._type(o, u, path)
        self._enum(o, u, path)
        self._bounds(o, u, path)
        self._strings(o, u, path)
        self._not(original, update, path)
        Objects(self, original, update, path).compare()
        Arrays(self, original, update, path).compare()

    def _metadata(self, o: dict[str, Any], u: dict[str, Any], path: str) -> None:
        for key, kind in (("$id", "ID_CHANGED"), ("id", "ID_CHANGED"),
                          ("description", "DESCRIPTION_CHANGED"), ("title", "TITLE_CHANGED"),
                          ("default", "DEFAULT_CHANGED")):
            if o.get(key) != u.get(key):
                self.add(kind, path)
        if "$schema" in o and "$schema" not in u:
            self.add("SCHEMA_REMOVED", path)

    def _type(self, o: dict[str, Any], u: dict[str, Any], path: str) -> None:
        old, new = _types(o), _types(u)
        if old == new:
            return
        if old < new:
            self.add("TYPE_EXTENDED", f"{path}/type")
        elif new < old:
            self.add("TYPE_NARROWED", f"{path}/type")
        else:
            self.add("TYPE_CHANGED", f"{path}/type")

    def _enum(self, o: dict[str, Any], u: dict[str, Any], path: str) -> None:
        old, new = _enum_values(o), _enum_values(u)
        if old == new or new is None:
            if old is not None and new is None:
                self.add("ENUM_ARRAY_EXTENDED", f"{path}/enum")
            return
        if old is not None and all(v in new for v in old):
            self.add("ENUM_ARRAY_EXTENDED", f"{path}/enum")
        else:
            self.add("ENUM_ARRAY_NARROWED" if old is not None else "ENUM_ARRAY_ADDED",
                     f"{path}/enum")

    def _bounds(self, o: dict[str, Any], u: dict[str, Any], path: str) -> None:
        for key, name in UPPER_BOUNDS.items():
            self._bound(o.get(key), u.get(key), name, f"{path}/{key}", upper=True)
        for key, name in LOWER_BOUNDS.items():
            self._bound(o.get(key), u.get(key), name, f"{path}/{key}", upper=False)
        self._multiple_of(o.get("multipleOf"), u.get("multipleOf"), f"{path}/multipleOf")

    def _bound(self, old: Any, new: Any, name: str, path: str, upper: bool) -> None:
        if old == new:
            return
        if isinstance(old, bool) or isinstance(new, bool):  # draft 4's exclusive flags
            self.add(f"{name}_REMOVED" if not new else f"{name}_ADDED", path)
        elif new is None:
            self.add(f"{name}_REMOVED", path)
        elif old is None:
            self.add(f"{name}_ADDED", path)
        elif (new > old) == upper:
            self.add(f"{name}_INCREASED" if upper else f"{name}_DECREASED", path)
        else:
            self.add(f"{name}_DECREASED" if upper else f"{name}_INCREASED", path)

    def _multiple_of(self, old: Any, new: Any, path: str) -> None:
        if old == new:
            return
        if new is None:
            self.add("MULTIPLE_OF_REMOVED", path)
        elif old is None:
            self.add("MULTIPLE_OF_ADDED", path)
        elif (old / new) == int(old / new):
            self.add("MULTIPLE_OF_REDUCED", path)
        elif (new / old) == int(new / old):
            self.add("MULTIPLE_OF_EXPANDED", path)
        else:
            self.add("MULTIPLE_OF_CHANGED", path)

    def _strings(self, o: dict[str, Any], u: dict[str, Any], path: str) -> None:
        old, new = o.get("pattern"), u.get("pattern")
        if old != new:
            kind = "PATTERN_REMOVED" if new is None else "PATTERN_ADDED" if old is None else \
                "PATTERN_CHANGED"
            self.add(kind, f"{path}/pattern")

    def _not(self, original: Side, update: Side, path: str) -> None:
        old, new = original.node.get("not"), update.node.get("not")
        if old == new:
            return
        if new is None:
            self.add("NOT_TYPE_REMOVED", f"{path}/not")
        elif old is None:
            self.add("NOT_TYPE_ADDED", f"{path}/not")
        elif self.incompatible(update.child(new), original.child(old), f"{path}/not"):
            self.add("NOT_TYPE_EXTENDED", f"{path}/not")
        else:
            self.add("NOT_TYPE_NARROWED", f"{path}/not")

    def _combined(self, original: Side, update: Side, path: str) -> bool:
        """Compare `allOf`/`anyOf`/`oneOf`; True if either side is one (then that's all)."""
        o_kind, u_kind = _combinator(original.node), _combinator(update.node)
        if o_kind is None and u_kind is None:
            return False
        if o_kind is None:
            self._into_combined(original, update, u_kind, path)
        elif u_kind is None:
            self._out_of_combined(original, update, o_kind, path)
        else:
            self._both_combined(original, update, o_kind, u_kind, path)
        return True

    def _into_combined(self, original: Side, update: Side, u_kind: Any, path: str) -> None:
        branches = [update.child(b) for b in update.node[u_kind]]
        if u_kind == "allOf":
            for index, branch in enumerate(branches):
                self.compare(original, branch, f"{path}/allOf/{index}")
        elif any(not self.incompatible(original, b, path) for b in branches):
            self.add("SUM_TYPE_EXTENDED", f"{path}/{u_kind}")
        else:
            self.add("TYPE_CHANGED", f"{path}/{u_kind}")

    def _out_of_combined(self, original: Side, update: Side, o_kind: Any, path: str) -> None:
        branches = [original.child(b) for b in original.node[o_kind]]
        if o_kind == "allOf":
            if any(not self.incompatible(b, update, path) for b in branches):
                self.add("PRODUCT_TYPE_NARROWED", f"{path}/allOf")
            else:
                self.add("TYPE_CHANGED", f"{path}/allOf")
        elif len(branches) == 1:
            self.compare(branches[0], update, f"{path}/{o_kind}/0")
        else:
            self.add("SUM_TYPE_NARROWED", f"{path}/{o_kind}")

    def _both_combined(self, original: Side, update: Side, o_kind: Any, u_kind: Any,
                       path: str) -> None:
        if o_kind != u_kind:
            extended = u_kind == "anyOf"
            self.add("COMBINED_TYPE_EXTENDED" if extended else "COMBINED_TYPE_CHANGED",
                     f"{path}/{o_kind}")
            if not extended:
                return
        old = [original.child(b) for b in original.node[o_kind]]
        new = [update.child(b) for b in update.node[u_kind]]
        if u_kind == "allOf":
            pairs = _pairs(self, new, old, path, flipped=True)
            self._match_branches(pairs, len(new), u_kind, path)
            if len(new) < len(old):
                self.add("PRODUCT_TYPE_NARROWED", f"{path}/allOf")
        else:
            pairs = _pairs(self, old, new, path, flipped=False)
            self._match_branches(pairs, len(old), u_kind, path)
            if len(new) > len(old):
                self.add("SUM_TYPE_EXTENDED", f"{path}/{u_kind}")

    def _match_branches(self, pairs: list[tuple[int, int] | None], needed: int, kind: str,
                        path: str) -> None:
        if len([p for p in pairs if p is not None]) < needed:
            wanted = "PRODUCT_TYPE_EXTENDED" if kind == "allOf" else "SUM_TYPE_NARROWED"
            self.add(wanted, f"{path}/{kind}")


def _pairs(differ: _Differ, sources: list[Side], targets: list[Side], path: str,
           flipped: bool) -> list[tuple[int, int] | None]:
    """Each source branch paired with a distinct target branch that reads it (greedy, in
    order; `flipped`: the source is the update, for allOf)."""
    taken: set[int] = set()
    pairs: list[tuple[int, int] | None] = []
    for i, source in enumerate(sources):
        match = None
        for j, target in enumerate(targets):
            if j in taken:
                continue
            o, u = (target, source) if flipped else (source, target)
            if not differ.incompatible(o, u, path):
                match = (i, j)
                taken.add(j)
                break
        pairs.append(match)
    return pairs


def _combinator(node: Any) -> str | None:
    kinds = [k for k in COMBINATORS if isinstance(node, dict) and k in node]
    return kinds[0] if len(kinds) == 1 else None


def _enum_values(node: dict[str, Any]) -> list[Any] | None:
    if "enum" in node and isinstance(node["enum"], list):
        return list(node["enum"])
    if "const" in node:
        return [node["const"]]
    return None
