"""Schema nodes as the JSON Schema checker walks them: a node with the resolver its `$ref`s
resolve with, boolean schemas as objects, and what counts as an empty schema."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import referencing
import referencing._core
import referencing.exceptions

METADATA = ("title", "description", "default", "$comment", "examples", "$id", "id",
            "$schema", "definitions", "$defs", "readOnly", "writeOnly", "deprecated")


@dataclass(frozen=True)
class Side:
    """A schema node and the resolver its `$ref`s resolve with."""

    node: Any
    resolver: referencing._core.Resolver[Any]

    def deref(self) -> Side:
        side = self
        for _ in range(64):
            node = side.node
            if not (isinstance(node, dict) and isinstance(node.get("$ref"), str)):
                break
            try:
                resolved = side.resolver.lookup(node["$ref"])
            except referencing.exceptions.Unresolvable:
                break
            rest = {k: v for k, v in node.items() if k != "$ref"}
            target = resolved.contents
            if rest and isinstance(target, dict):  # 2019-09+: siblings of $ref apply too
                target = {**target, **rest}
            side = Side(target, resolved.resolver)
        return side

    def child(self, node: Any) -> Side:
        return Side(node, self.resolver)


def normal(node: Any) -> Any:
    if node is True:
        return {}
    if node is False:
        return {"not": {}}
    return node


def is_empty(node: Any) -> bool:
    node = normal(node)
    return isinstance(node, dict) and not any(k not in METADATA for k in node)
