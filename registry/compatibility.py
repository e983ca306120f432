"""Avro schema resolution as a static check, and Confluent's compatibility levels.

`reader_incompatibilities(reader, writer)` answers "can data written with `writer` always
be read with `reader`?" by the specification's schema-resolution rules, reporting each
problem with the path of the reader's schema where it sits. The rules are the ones Apache
Avro's reference checkers implement (Java `SchemaCompatibility`, Python
`avro.compatibility`), which is what Confluent and Karapace run:

- primitives match themselves or a promotable writer type (int→long→float→double,
  string↔bytes); arrays and maps match on items and values;
- records, enums and fixed match on unqualified name or a reader alias of the writer's
  full name; fixed sizes must be equal; record fields pair up by name or reader field
  alias; a reader-only field needs a default; writer-only fields are skipped;
- writer enum symbols missing from the reader need the reader enum's `default`;
- every branch of a writer union must be readable; a reader union reads a writer type if
  any branch can;
- unlike the reference checkers, and as the specification says, two `decimal` types
  must agree on precision and scale.

Recursive types are handled by assuming a pair under check is compatible while it is
being checked, as the reference checkers do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from .avro import PRIMITIVES, AvroSchema, resolve, type_of

_PROMOTIONS: dict[str, frozenset[str]] = {
    "long": frozenset({"int"}),
    "float": frozenset({"int", "long"}),
    "double": frozenset({"int", "long", "float"}),
    "bytes": frozenset({"string"}),
    "string": frozenset({"bytes"}),
}


class Level(StrEnum):
    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"
    NONE = "NONE"

    @property
    def transitive(self) -> bool:
        return self.endswith("_TRANSITIVE")

    @property
    def backward(self) -> bool:
        return self.startswith(("BACKWARD", "FULL"))

    @property
    def forward(self) -> bool:
        return self.startswith(("FORWARD", "FULL"))


DEFAULT_LEVEL = Level.BACKWARD


@dataclass(frozen=True)
class Incompatibility:
    error_type: str  # the names of Avro's SchemaIncompatibilityType
    location: str
    description: str
    info: str

    def message(self) -> str:
        return (
            f"{{errorType:'{self.error_type}', description:'{self.description}', "
            f"additionalInfo:'{self.info}'}}"
        )


def reader_incompatibilities(reader: AvroSchema, writer: AvroSchema) -> list[Incompatibility]:
    return _Checker(reader.named, writer.named).check(reader.parsed, writer.parsed, "")


class _Checker:
    def __init__(self, reader_named: Mapping[str, Any], writer_named: Mapping[str, Any]) -> None:
        self.reader_named = reader_named
        self.writer_named = writer_named
        self.memo: dict[tuple[int, int], list[Incompatibility]] = {}

    def check(self, reader: Any, writer: Any, location: str) -> list[Incompatibility]:
        reader = resolve(reader, self.reader_named)
        writer = resolve(writer, self.writer_named)
        key = (id(reader), id(writer))
        if key in self.memo:
            return self.memo[key]  # empty while in progress: recursion assumes compatible
        self.memo[key] = []
        result = self._calculate(reader, writer, location)
        self.memo[key] = result
        return result

    def _calculate(self, reader: Any, writer: Any, location: str) -> list[Incompatibility]:
        r_type, w_type = type_of(reader), type_of(writer)
        if r_type == w_type:
            return self._same_type(r_type, reader, writer, location)
        if w_type == "union":
            return [i for branch in writer for i in self.check(reader, branch, location)]
        if r_type == "union":
            if any(not self.check(branch, writer, location) for branch in reader):
                return []
            return [
                _problem(
                    "MISSING_UNION_BRANCH",
                    location,
                    f"reader union lacking writer type: {w_type.upper()}",
                    w_type,
                )
            ]
        if w_type in _PROMOTIONS.get(r_type, ()):
            return []
        return [_type_mismatch(r_type, w_type, location)]

    def _same_type(
        self, kind: str, reader: Any, writer: Any, location: str
    ) -> list[Incompatibility]:
        if kind in PRIMITIVES:
            return _decimal_mismatch(reader, writer, location)
        if kind == "array":
            return self.check(reader["items"], writer["items"], f"{location}/items")
        if kind == "map":
            return self.check(reader["values"], writer["values"], f"{location}/values")
        if kind == "union":
            return self._union(reader, writer, location)
        problems = _name_mismatch(reader, writer, location)
        if kind == "fixed":
            problems += _size_mismatch(reader, writer, location)
            problems += _decimal_mismatch(reader, writer, location)
        elif kind == "enum":
            problems += _missing_symbols(reader, writer, location)
        else:
            problems += self._fields(reader, writer, location)
        return problems

    def _union(self, reader: list[Any], writer: list[Any], location: str) -> list[Incompatibility]:
        problems = []
        for index, branch in enumerate(writer):
            if self.check(reader, branch, location):
                kind = type_of(resolve(branch, self.writer_named))
                problems.append(
                    _problem(
                        "MISSING_UNION_BRANCH",
                        f"{location}/{index}",
                        f"reader union lacking writer type: {kind.upper()}",
                        kind,
                    )
                )
        return problems

    def _fields(self, reader: Any, writer: Any, location: str) -> list[Incompatibility]:
        writer_fields = {f["name"]: f for f in writer["fields"]}
        problems: list[Incompatibility] = []
        for index, field in enumerate(reader["fields"]):
            here = f"{location}/fields/{index}"
            match = _writer_field(field, writer_fields)
            if match is not None:
                problems += self.check(field["type"], match["type"], f"{here}/type")
            elif "default" not in field:
                problems.append(
                    _problem(
                        "READER_FIELD_MISSING_DEFAULT_VALUE",
                        here,
                        f"The field '{field['name']}' at path '{here}' in the reader schema has "
                        "no default value and is missing in the writer schema",
                        field["name"],
                    )
                )
        return problems


def _writer_field(field: dict[str, Any], writer_fields: dict[str, Any]) -> Any:
    if field["name"] in writer_fields:
        return writer_fields[field["name"]]
    for alias in field.get("aliases") or ():
        if alias in writer_fields:
            return writer_fields[alias]
    return None


def _problem(error_type: str, location: str, description: str, info: str) -> Incompatibility:
    return Incompatibility(error_type, location or "/", description, info)


def _type_mismatch(r_type: str, w_type: str, location: str) -> Incompatibility:
    return _problem(
        "TYPE_MISMATCH",
        location,
        f"The type (path '{location or '/'}') of a field in the reader schema ({r_type.upper()}) "
        f"does not match the writer schema ({w_type.upper()})",
        f"reader type: {r_type.upper()} not compatible with writer type: {w_type.upper()}",
    )


def _name_mismatch(reader: Any, writer: Any, location: str) -> list[Incompatibility]:
    reader_name, writer_name = str(reader["name"]), str(writer["name"])
    if reader_name.rsplit(".", 1)[-1] == writer_name.rsplit(".", 1)[-1]:
        return []
    namespace = reader_name.rsplit(".", 1)[0] if "." in reader_name else ""
    aliases = {
        a if "." in a or not namespace else f"{namespace}.{a}" for a in reader.get("aliases") or ()
    }
    if writer_name in aliases:
        return []
    return [
        _problem(
            "NAME_MISMATCH",
            f"{location}/name",
            f"The name of the schema has changed (path '{location}/name'): "
            f"the reader has '{reader_name}', the writer '{writer_name}'",
            f"expected: {writer_name}",
        )
    ]


def _size_mismatch(reader: Any, writer: Any, location: str) -> list[Incompatibility]:
    if reader["size"] == writer["size"]:
        return []
    return [
        _problem(
            "FIXED_SIZE_MISMATCH",
            f"{location}/size",
            f"The size of FIXED type field at path '{location}/size' differs: "
            f"the reader has {reader['size']}, the writer {writer['size']}",
            f"expected: {writer['size']}, found: {reader['size']}",
        )
    ]


def _missing_symbols(reader: Any, writer: Any, location: str) -> list[Incompatibility]:
    missing = [s for s in writer["symbols"] if s not in reader["symbols"]]
    if not missing or "default" in reader:
        return []
    return [
        _problem(
            "MISSING_ENUM_SYMBOLS",
            f"{location}/symbols",
            f"The reader enum at path '{location}/symbols' lacks the writer's symbols "
            f"{missing} and has no default",
            ", ".join(missing),
        )
    ]


def _decimal(schema: Any) -> tuple[Any, Any] | None:
    if isinstance(schema, dict) and schema.get("logicalType") == "decimal":
        return schema.get("precision"), schema.get("scale", 0)
    return None


def _decimal_mismatch(reader: Any, writer: Any, location: str) -> list[Incompatibility]:
    r_decimal, w_decimal = _decimal(reader), _decimal(writer)
    if r_decimal is None or w_decimal is None or r_decimal == w_decimal:
        return []
    return [
        _problem(
            "DECIMAL_MISMATCH",
            location,
            f"The decimal at path '{location or '/'}' changes (precision, scale) from "
            f"{w_decimal} in the writer to {r_decimal} in the reader",
            f"expected: {w_decimal}, found: {r_decimal}",
        )
    ]


Rules = Callable[[Any, Any], list[Incompatibility]]


def check_level(
    level: Level, new: Any, previous: Sequence[tuple[int, Any]],
    rules: Rules | None = None,
) -> list[str]:
    """Messages for each live version `new` conflicts with under `level` (oldest first).

    `rules(reader, writer)` is the format's reader check, Avro's by default; the levels
    are the same for every format: backward reads the previous version's data with the new
    schema, forward the other way round.
    """
    if level is Level.NONE or not previous:
        return []
    check: Rules = rules or reader_incompatibilities
    against = previous if level.transitive else previous[-1:]
    messages: list[str] = []
    for version, old in reversed(against):
        problems: list[Incompatibility] = []
        if level.backward:
            problems += check(new, old)
        if level.forward:
            problems += check(old, new)
        if problems:
            messages += [p.message() for p in problems]
            messages += [
                f"{{oldSchemaVersion: {version}}}",
                f"{{oldSchema: '{old.text}'}}",
                f"{{compatibility: '{level.value}'}}",
            ]
    return messages
