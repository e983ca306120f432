"""JSON Schema: parse and validate (drafts 4, 6, 7, 2019-09, 2020-12), references by `$ref`
URL, canonical text, and Confluent's compatibility rules (`compatibility.py`)."""

from __future__ import annotations

from collections.abc import Sequence

from registry.compatibility import Incompatibility
from registry.parsed import JSON, ParsedSchema, Resolved

from .compatibility import reader_incompatibilities
from .schema import JsonSchema, parse


class JsonSchemaFormat:
    name = JSON

    def parse(self, text: str, references: Sequence[Resolved], normalize: bool) -> ParsedSchema:
        return parse(text, references, normalize)

    def reader_incompatibilities(
        self, reader: ParsedSchema, writer: ParsedSchema
    ) -> list[Incompatibility]:
        assert isinstance(reader, JsonSchema) and isinstance(writer, JsonSchema)
        return reader_incompatibilities(reader, writer)

    def formatted(self, schema: ParsedSchema, fmt: str) -> str | None:
        return None


FORMAT = JsonSchemaFormat()
