"""What the registry's formats share: Confluent's `schemaType` names and a parsed schema.

The format packages (`registry.avro`, `registry.json_schema`, `registry.protobuf`) import
these from here; `registry.formats`, which loads the packages, re-exports them for callers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

AVRO = "AVRO"
JSON = "JSON"
PROTOBUF = "PROTOBUF"
TYPES = (JSON, PROTOBUF, AVRO)  # the order Confluent lists them in /schemas/types


class ParsedSchema(Protocol):
    """A schema as a format parsed it: `text` is canonical, `parsed` the format's own form."""

    @property
    def text(self) -> str: ...

    @property
    def parsed(self) -> Any: ...


@dataclass(frozen=True)
class Resolved:
    """A reference as a format sees it: its `name` in the referring schema (an Avro type
    name, a JSON Schema `$ref` URL, a .proto import path) and the schema it names."""

    name: str
    schema: ParsedSchema
    schema_type: str
