"""The schema formats the registry serves, behind one small interface.

Everything outside a format's own modules handles schemas through `SchemaFormat`: parse
text (with the schemas it references, resolved by the registry) into a `ParsedSchema`
whose canonical `text` is what is stored, returned and fingerprinted, list what stops a
reader schema from reading a writer schema's data, and render the stored text in another
`format` (Protobuf's `serialized`). `FORMATS` maps Confluent's `schemaType` names to them;
`get()` answers 42201 for a name it does not know.

Each format module imports what it needs lazily through this table, so a process that
never sees a Protobuf schema never loads protoc. The format packages take the names and
types they share from `registry.parsed`, never from here, so nothing imports in a circle.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from registry import errors
from registry.compatibility import Incompatibility
from registry.parsed import AVRO, JSON, PROTOBUF, TYPES, ParsedSchema, Resolved

__all__ = ["AVRO", "JSON", "PROTOBUF", "TYPES", "ParsedSchema", "Resolved", "SchemaFormat", "get"]

class SchemaFormat(Protocol):
    name: str

    def parse(self, text: str, references: Sequence[Resolved], normalize: bool) -> ParsedSchema:
        """The parsed schema; 42201 (`errors.invalid_schema`) if it is not one."""

    def reader_incompatibilities(
        self, reader: ParsedSchema, writer: ParsedSchema
    ) -> list[Incompatibility]:
        """What stops `reader` from reading everything written with `writer`."""

    def formatted(self, schema: ParsedSchema, fmt: str) -> str | None:
        """The schema text in `fmt` (a `?format=` value), None for one it does not have."""


class _Avro:
    name = AVRO

    def parse(self, text: str, references: Sequence[Resolved], normalize: bool) -> ParsedSchema:
        from . import avro

        named = [r.schema for r in references if isinstance(r.schema, avro.AvroSchema)]
        return avro.parse(text, named, normalize)

    def reader_incompatibilities(
        self, reader: ParsedSchema, writer: ParsedSchema
    ) -> list[Incompatibility]:
        from .compatibility import reader_incompatibilities

        return reader_incompatibilities(reader, writer)  # type: ignore[arg-type]

    def formatted(self, schema: ParsedSchema, fmt: str) -> str | None:
        return None


def _json_format() -> SchemaFormat:
    from .json_schema import FORMAT

    return FORMAT


def _protobuf_format() -> SchemaFormat:
    from .protobuf import FORMAT

    return FORMAT


_LOADERS: dict[str, Callable[[], SchemaFormat]] = {
    AVRO: _Avro,
    JSON: _json_format,
    PROTOBUF: _protobuf_format,
}
_loaded: dict[str, SchemaFormat] = {}


def get(schema_type: str) -> SchemaFormat:
    """The format named `schema_type` (Confluent's names, any case); 42201 if unknown."""
    name = schema_type.upper()
    found = _loaded.get(name)
    if found is None:
        loader = _LOADERS.get(name)
        if loader is None:
            raise errors.invalid_schema_type(schema_type)
        found = _loaded[name] = loader()
    return found
