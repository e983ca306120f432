"""Protobuf: .proto text (proto2, proto3) or a base64 `FileDescriptorProto`, imports
resolved through references, canonical text, `?format=serialized`, and Confluent's
compatibility rules (`compatibility.py`).

A schema arrives as .proto text (compiled by protoc, `compiler.py`) or as a base64
descriptor (what confluent-kafka's ProtobufSerializer registers; checked by building it
into a descriptor pool with its imports). Either way it is written out as .proto text
(`render.py`), and a descriptor (or normalized text) compiled again from that text: the
text is what is stored and fingerprinted, and its compiled descriptor is what
`?format=serialized` answers, so a schema has one id whichever way it came. (Text compiled
as given declares what its canonical text declares, in the same order, so it is compiled
once; the differential test checks that on every generated pair.) A reference's `name` is
the import path it stands for; imports of `google/protobuf/*`, `google/type/*` and
Confluent's `confluent/meta.proto` and `confluent/type/decimal.proto` need no reference.
Custom options an import declares (Confluent's `confluent.field_meta`, which its Connect
converter puts a Decimal's precision and scale in) are written out with the rest.
`wire.py` reads message indexes and builds message classes for decoders.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from google.protobuf import descriptor_pb2 as pb
from google.protobuf import descriptor_pool

from registry.compatibility import Incompatibility
from registry.errors import invalid_schema
from registry.parsed import PROTOBUF, ParsedSchema, Resolved

from . import compatibility, compiler
from .render import render

_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]+\Z")


@dataclass(frozen=True)
class ProtobufSchema:
    text: str
    parsed: pb.FileDescriptorProto
    # Every file it imports, transitively: import path -> (.proto text, descriptor).
    imports: dict[str, tuple[str, pb.FileDescriptorProto]] = field(repr=False)

    def serialized(self) -> str:
        return base64.standard_b64encode(self.parsed.SerializeToString()).decode("ascii")


def parse(text: str, references: Sequence[Resolved], normalize: bool) -> ProtobufSchema:
    imports: dict[str, tuple[str, pb.FileDescriptorProto]] = {}
    for reference in references:
        if not isinstance(reference.schema, ProtobufSchema):
            raise invalid_schema(f"reference {reference.name} is not a Protobuf schema")
        imports.update(reference.schema.imports)
        named = pb.FileDescriptorProto()
        named.CopyFrom(reference.schema.parsed)
        named.name = reference.name
        imports[reference.name] = (reference.schema.text, named)
    sources = {name: source for name, (source, _) in imports.items()}
    if _BASE64.match(text):
        descriptor = _from_descriptor(text, imports)
        again = True  # a client's descriptor may differ in details protoc fills in
    else:
        descriptor, _ = compiler.compile_text(text, sources)
        again = normalize  # else the text declares what the canonical text does, in order
    canonical = render(descriptor, normalize, _options_pool(descriptor, imports))
    if again:
        descriptor, _ = compiler.compile_text(canonical, sources)
    return ProtobufSchema(text=canonical, parsed=descriptor, imports=imports)


def _from_descriptor(text: str, imports: dict[str, tuple[str, pb.FileDescriptorProto]]
                     ) -> pb.FileDescriptorProto:
    try:
        serialized = base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise invalid_schema(f"neither .proto text nor a base64 FileDescriptorProto: {exc}"
                             ) from exc
    descriptor = compiler.decode(serialized)
    if not descriptor.message_type and not descriptor.enum_type and not descriptor.service:
        raise invalid_schema("the FileDescriptorProto declares nothing")
    descriptor.name = compiler.SCHEMA_FILE
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()
    for name in descriptor.dependency:
        _add(pool, name, imports, added)
    try:
        pool.Add(descriptor)
        pool.FindFileByName(descriptor.name)
    except (TypeError, KeyError, ValueError) as exc:
        raise invalid_schema(f"the FileDescriptorProto does not build: {exc}") from exc
    return descriptor


def _options_pool(descriptor: pb.FileDescriptorProto,
                  imports: dict[str, tuple[str, pb.FileDescriptorProto]]
                  ) -> descriptor_pool.DescriptorPool | None:
    """A pool of the file's imports (and descriptor.proto), in which its options' custom
    extensions are known; None when it imports nothing, so declares no such extension."""
    if not descriptor.dependency:
        return None
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()
    for name in ("google/protobuf/descriptor.proto", *descriptor.dependency):
        _add(pool, name, imports, added)
    return pool


def _add(pool: descriptor_pool.DescriptorPool, name: str,
         imports: dict[str, tuple[str, pb.FileDescriptorProto]], added: set[str]) -> None:
    if name in added:
        return
    added.add(name)
    if name in imports:
        descriptor = imports[name][1]
    elif compiler.is_builtin(name):
        descriptor = compiler.builtin(name)
    else:
        raise invalid_schema(f"no reference for the import {name}")
    for dependency in descriptor.dependency:
        _add(pool, dependency, imports, added)
    try:
        pool.Add(descriptor)
    except (TypeError, ValueError) as exc:
        raise invalid_schema(f"import {name} does not build: {exc}") from exc


class ProtobufFormat:
    name = PROTOBUF

    def parse(self, text: str, references: Sequence[Resolved], normalize: bool) -> ParsedSchema:
        return parse(text, references, normalize)

    def reader_incompatibilities(
        self, reader: ParsedSchema, writer: ParsedSchema
    ) -> list[Incompatibility]:
        return compatibility.reader_incompatibilities(reader.parsed, writer.parsed)

    def formatted(self, schema: ParsedSchema, fmt: str) -> str | None:
        if fmt == "serialized" and isinstance(schema, ProtobufSchema):
            return schema.serialized()
        return None


FORMAT = ProtobufFormat()
