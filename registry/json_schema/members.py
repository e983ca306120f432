"""Object properties and tuple items under their content model (open, closed or partially
open), for the JSON Schema checker (`compatibility.py`, whose `_Differ` is the `Differ`)."""

from __future__ import annotations

import re
from typing import Any, Protocol

from .nodes import Side, is_empty, normal


class Differ(Protocol):
    def add(self, kind: str, path: str, info: str = "") -> None: ...

    def compare(self, original: Side, update: Side, path: str) -> None: ...

    def incompatible(self, original: Side, update: Side, path: str) -> bool: ...


def _model(node: dict[str, Any], extra: str, patterns: str | None) -> str:
    more = node.get(extra, True)
    if more is False:
        return "CLOSED"
    if (patterns and node.get(patterns)) or (isinstance(more, dict) and not is_empty(more)):
        return "PARTIALLY_OPEN"
    return "OPEN"


def _covering(node: dict[str, Any], name: str, extra: str, patterns: str | None) -> Any:
    """The schema an undeclared member `name` is valid under, or None if it is not."""
    for pattern, schema in (node.get(patterns) or {}).items() if patterns else ():
        try:
            if re.search(pattern, name):
                return schema
        except re.error:
            continue
    more = node.get(extra, True)
    return None if more is False else ({} if more is True else more)


class Members:
    """What objects and tuple arrays share: members added or removed under a content model."""

    what = "PROPERTY"
    extra = "additionalProperties"
    patterns: str | None = "patternProperties"

    def __init__(self, differ: Differ, original: Side, update: Side, path: str) -> None:
        self.differ, self.original, self.update, self.path = differ, original, update, path

    def added(self, name: str, schema: Any, required: bool, has_default: bool) -> None:
        o = self.original.node
        here = f"{self.path}/{self._where(name)}"
        model = _model(o, self.extra, self.patterns)
        if model == "OPEN":
            self._add_open(schema, here)
        elif model == "CLOSED":
            self._add_unopen(required, has_default, here)
        else:
            covering = _covering(o, name, self.extra, self.patterns)
            if covering is None:
                self._add_unopen(required, has_default, here)
            elif self.differ.incompatible(self.original.child(covering), self.update.child(schema),
                                          here):
                self.differ.add(f"{self.what}_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
                                here)
            else:
                self.differ.add(f"{self.what}_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
                                here)

    def _add_open(self, schema: Any, here: str) -> None:
        if is_empty(schema):
            self.differ.add(f"{self.what}_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", here)
        else:
            self.differ.add(f"{self.what}_ADDED_TO_OPEN_CONTENT_MODEL", here)

    def _add_unopen(self, required: bool, has_default: bool, here: str) -> None:
        if self.what == "ITEM":
            self.differ.add("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL", here)
        elif not required:
            self.differ.add("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", here)
        elif has_default:
            self.differ.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL", here)
        else:
            self.differ.add("REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", here)

    def removed(self, name: str, schema: Any) -> None:
        u = self.update.node
        here = f"{self.path}/{self._where(name)}"
        model = _model(u, self.extra, self.patterns)
        if model == "OPEN":
            self.differ.add(f"{self.what}_REMOVED_FROM_OPEN_CONTENT_MODEL", here)
            return
        covering = None if model == "CLOSED" else _covering(u, name, self.extra, self.patterns)
        if covering is None:
            kind = "WITH_FALSE_REMOVED" if normal(schema) == {"not": {}} else "REMOVED"
            self.differ.add(f"{self.what}_{kind}_FROM_CLOSED_CONTENT_MODEL", here)
        elif self.differ.incompatible(self.original.child(schema), self.update.child(covering),
                                      here):
            self.differ.add(f"{self.what}_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
                            here)
        else:
            self.differ.add(f"{self.what}_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
                            here)

    def extra_members(self) -> None:
        """`additionalProperties`/`additionalItems`: may accept more, never less."""
        old, new = self.original.node.get(self.extra, True), self.update.node.get(self.extra, True)
        name = self.extra.replace("additional", "ADDITIONAL_").upper()
        here = f"{self.path}/{self.extra}"
        if old == new or (is_empty(old) and is_empty(new)):
            return
        if is_empty(new):
            self.differ.add(f"{name}_ADDED" if old is False else f"{name}_EXTENDED", here)
        elif new is False:
            self.differ.add(f"{name}_REMOVED", here)
        elif old is False:
            self.differ.add(f"{name}_ADDED", here)
        elif is_empty(old) or self.differ.incompatible(self.original.child(old),
                                                        self.update.child(new), here):
            self.differ.add(f"{name}_NARROWED", here)
        else:
            self.differ.add(f"{name}_EXTENDED", here)

    def _where(self, name: str) -> str:
        return f"properties/{name}"


class Objects(Members):
    def compare(self) -> None:
        o, u = self.original.node, self.update.node
        old_props, new_props = o.get("properties") or {}, u.get("properties") or {}
        old_required, new_required = set(o.get("required") or ()), set(u.get("required") or ())
        for name in old_props.keys() & new_props.keys():
            here = f"{self.path}/properties/{name}"
            self.differ.compare(self.original.child(old_props[name]),
                                self.update.child(new_props[name]), here)
        for name in new_props.keys() - old_props.keys():
            schema = normal(new_props[name])
            self.added(name, schema, name in new_required,
                       isinstance(schema, dict) and "default" in schema)
        for name in old_props.keys() - new_props.keys():
            self.removed(name, old_props[name])
        self._required(old_required, new_required, old_props, new_props)
        self._patterns()
        self.extra_members()
        self._dependencies()

    def _required(self, old: set[str], new: set[str], old_props: dict[str, Any],
                  new_props: dict[str, Any]) -> None:
        for name in sorted(new - old):
            if name in new_props and name not in old_props:
                continue  # reported as an added property
            schema = normal(new_props.get(name, {}))
            kind = ("REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED"
                    if isinstance(schema, dict) and "default" in schema
                    else "REQUIRED_ATTRIBUTE_ADDED")
            self.differ.add(kind, f"{self.path}/required/{name}")
        for name in sorted(old - new):
            self.differ.add("REQUIRED_ATTRIBUTE_REMOVED", f"{self.path}/required/{name}")

    def _patterns(self) -> None:
        old = self.original.node.get("patternProperties") or {}
        new = self.update.node.get("patternProperties") or {}
        for pattern in old.keys() & new.keys():
            self.differ.compare(self.original.child(old[pattern]), self.update.child(new[pattern]),
                                f"{self.path}/patternProperties/{pattern}")
        for pattern in new.keys() - old.keys():
            self.differ.add("PATTERN_PROPERTY_ADDED", f"{self.path}/patternProperties/{pattern}")

    def _dependencies(self) -> None:
        old, new = _dependencies(self.original.node), _dependencies(self.update.node)
        for name in sorted(old.keys() | new.keys()):
            here = f"{self.path}/dependencies/{name}"
            before, after = old.get(name), new.get(name)
            if before == after:
                continue
            array = isinstance(before, list) or isinstance(after, list)
            noun = "DEPENDENCY_ARRAY" if array else "DEPENDENCY_SCHEMA"
            if after is None:
                self.differ.add(f"{noun}_REMOVED", here)
            elif before is None:
                self.differ.add(f"{noun}_ADDED", here)
            elif isinstance(before, list) and isinstance(after, list):
                narrowed = set(after) <= set(before)
                self.differ.add(f"{noun}_NARROWED" if narrowed else f"{noun}_EXTENDED", here)
            elif not array:
                self.differ.compare(self.original.child(before), self.update.child(after), here)
            else:
                self.differ.add("DEPENDENCY_CHANGED", here)


def _dependencies(node: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key in ("dependencies", "dependentRequired", "dependentSchemas"):
        value = node.get(key)
        if isinstance(value, dict):
            found.update(value)
    return found


class Arrays(Members):
    what = "ITEM"
    extra = "additionalItems"
    patterns = None

    def compare(self) -> None:
        o, u = self.original.node, self.update.node
        self._unique(o.get("uniqueItems", False), u.get("uniqueItems", False))
        old_tuple, new_tuple = _tuple(o), _tuple(u)
        if old_tuple is None and new_tuple is None:
            self._items(o.get("items"), u.get("items"))
            return
        if "prefixItems" in o or "prefixItems" in u:
            self.extra = "items"
        old_tuple, new_tuple = old_tuple or [], new_tuple or []
        for index in range(min(len(old_tuple), len(new_tuple))):
            self.differ.compare(self.original.child(old_tuple[index]),
                                self.update.child(new_tuple[index]), f"{self.path}/items/{index}")
        for index in range(len(old_tuple), len(new_tuple)):
            self.added(str(index), new_tuple[index], False, False)
        for index in range(len(new_tuple), len(old_tuple)):
            self.removed(str(index), old_tuple[index])
        self.extra_members()

    def _items(self, old: Any, new: Any) -> None:
        if old == new:
            return
        self.differ.compare(self.original.child({} if old is None else old),
                            self.update.child({} if new is None else new), f"{self.path}/items")

    def _unique(self, old: Any, new: Any) -> None:
        if bool(old) != bool(new):
            kind = "UNIQUE_ITEMS_REMOVED" if old else "UNIQUE_ITEMS_ADDED"
            self.differ.add(kind, f"{self.path}/uniqueItems")

    def _where(self, name: str) -> str:
        return f"items/{name}"


def _tuple(node: dict[str, Any]) -> list[Any] | None:
    if isinstance(node.get("prefixItems"), list):
        return list(node["prefixItems"])
    if isinstance(node.get("items"), list):
        return list(node["items"])
    return None
