"""A `FileDescriptorProto` written out as .proto text: the canonical form of a schema.

Both ways a schema arrives (.proto text, or a base64 descriptor as confluent-kafka's
serializer sends it) end here, so one schema has one text whichever way it came. Type
names are written fully qualified (`.pkg.Msg`), which needs no scope resolution to read
back; messages, enums and services keep their order, since the wire format's message
indexes count them. Inside a message, fields come in declaration order, each oneof where
its first field is; with `normalize`, fields are ordered by number and imports and
options sorted. Options set through an import's extensions (`[(confluent.field_meta) =
{...}]`) reach the descriptor as unknown fields; with a pool of the imports they are read
again as that pool's option messages, so they are written out by name.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from google.protobuf import descriptor_pb2 as pb
from google.protobuf import descriptor_pool, message_factory, unknown_fields
from google.protobuf.descriptor import FieldDescriptor

from registry.errors import invalid_schema

F = pb.FieldDescriptorProto
SCALARS = {
    F.TYPE_DOUBLE: "double", F.TYPE_FLOAT: "float", F.TYPE_INT64: "int64",
    F.TYPE_UINT64: "uint64", F.TYPE_INT32: "int32", F.TYPE_FIXED64: "fixed64",
    F.TYPE_FIXED32: "fixed32", F.TYPE_BOOL: "bool", F.TYPE_STRING: "string",
    F.TYPE_BYTES: "bytes", F.TYPE_UINT32: "uint32", F.TYPE_SFIXED32: "sfixed32",
    F.TYPE_SFIXED64: "sfixed64", F.TYPE_SINT32: "sint32", F.TYPE_SINT64: "sint64",
}  # fmt: skip
LABELS = {F.LABEL_OPTIONAL: "optional", F.LABEL_REQUIRED: "required",
          F.LABEL_REPEATED: "repeated"}
INDENT = "  "


def render(file: pb.FileDescriptorProto, normalize: bool = False,
           pool: descriptor_pool.DescriptorPool | None = None) -> str:
    """`pool`: the file's imports, whose extensions its options may set."""
    if file.syntax not in ("", "proto2", "proto3"):
        raise invalid_schema(f"syntax {file.syntax!r} (editions) is not supported")
    return _Writer(file, normalize, pool).file()


class _Writer:
    def __init__(self, file: pb.FileDescriptorProto, normalize: bool,
                 pool: descriptor_pool.DescriptorPool | None = None) -> None:
        self.source = file
        self.pool = pool
        self.proto3 = file.syntax == "proto3"
        self.normalize = normalize
        self.lines: list[str] = []

    def emit(self, depth: int, text: str) -> None:
        self.lines.append(f"{INDENT * depth}{text}")

    def file(self) -> str:
        f = self.source
        self.emit(0, f'syntax = "{f.syntax or "proto2"}";')
        if f.package:
            self.emit(0, f"package {f.package};")
        imports = list(enumerate(f.dependency))
        if self.normalize:
            imports.sort(key=lambda pair: pair[1])
        for index, name in imports:
            kind = ("public " if index in f.public_dependency
                    else "weak " if index in f.weak_dependency else "")
            self.emit(0, f"import {kind}{_quote(name)};")
        self.options(0, f.options)
        scope = f".{f.package}" if f.package else ""
        for message in f.message_type:
            self.message(0, message, scope)
        for enum in f.enum_type:
            self.enum(0, enum)
        self.extensions(0, f.extension)
        for service in f.service:
            self.service(service)
        return "\n".join(self.lines) + "\n"

    def options(self, depth: int, options: Any, skip: Iterable[str] = ()) -> None:
        for text in _option_texts(options, skip, self.normalize, self.pool):
            self.emit(depth, f"option {text};")

    def message(self, depth: int, message: pb.DescriptorProto, scope: str) -> None:
        self.emit(depth, f"message {message.name} {{")
        inner = depth + 1
        scope = f"{scope}.{message.name}"
        self.options(inner, message.options, skip=("map_entry",))
        maps = {f"{scope}.{n.name}": n for n in message.nested_type if n.options.map_entry}
        self.fields(inner, message, maps)
        for nested in message.nested_type:
            if not nested.options.map_entry:
                self.message(inner, nested, scope)
        for enum in message.enum_type:
            self.enum(inner, enum)
        self.extensions(inner, message.extension)
        for extension_range in message.extension_range:
            self.emit(inner, f"extensions {_range(extension_range.start, extension_range.end)};")
        self.reserved(inner, message.reserved_range, message.reserved_name, exclusive=True)
        self.emit(depth, "}")

    def fields(self, depth: int, message: pb.DescriptorProto,
               maps: dict[str, pb.DescriptorProto]) -> None:
        fields = list(message.field)
        if self.normalize:
            fields.sort(key=lambda f: f.number)
        done_oneofs: set[int] = set()
        for field in fields:
            real_oneof = field.HasField("oneof_index") and not field.proto3_optional
            if not real_oneof:
                self.field(depth, field, maps)
                continue
            if field.oneof_index in done_oneofs:
                continue
            done_oneofs.add(field.oneof_index)
            oneof = message.oneof_decl[field.oneof_index]
            self.emit(depth, f"oneof {oneof.name} {{")
            self.options(depth + 1, oneof.options)
            for member in fields:
                if member.HasField("oneof_index") and member.oneof_index == field.oneof_index:
                    self.field(depth + 1, member, maps, in_oneof=True)
            self.emit(depth, "}")

    def field(self, depth: int, field: pb.FieldDescriptorProto,
              maps: dict[str, pb.DescriptorProto], in_oneof: bool = False) -> None:
        entry = maps.get(field.type_name)
        if field.type == F.TYPE_GROUP:
            raise invalid_schema(f"field {field.name}: groups are not supported")
        if entry is not None and field.label == F.LABEL_REPEATED:
            key, value = entry.field[0], entry.field[1]
            kind = f"map<{_type(key)}, {_type(value)}>"
            label = ""
        else:
            kind = _type(field)
            label = self.label(field, in_oneof)
        options = _field_options(field, self.pool)
        suffix = f" [{', '.join(options)}]" if options else ""
        self.emit(depth, f"{label}{kind} {field.name} = {field.number}{suffix};")

    def label(self, field: pb.FieldDescriptorProto, in_oneof: bool) -> str:
        if in_oneof:
            return ""
        if self.proto3:
            if field.label == F.LABEL_REPEATED:
                return "repeated "
            return "optional " if field.proto3_optional else ""
        return f"{LABELS[field.label]} "

    def enum(self, depth: int, enum: pb.EnumDescriptorProto) -> None:
        self.emit(depth, f"enum {enum.name} {{")
        self.options(depth + 1, enum.options)
        for value in enum.value:
            options = _option_texts(value.options, (), self.normalize, self.pool)
            suffix = f" [{', '.join(options)}]" if options else ""
            self.emit(depth + 1, f"{value.name} = {value.number}{suffix};")
        self.reserved(depth + 1, enum.reserved_range, enum.reserved_name, exclusive=False)
        self.emit(depth, "}")

    def extensions(self, depth: int, fields: Iterable[pb.FieldDescriptorProto]) -> None:
        by_extendee: dict[str, list[pb.FieldDescriptorProto]] = {}
        for field in fields:
            by_extendee.setdefault(field.extendee, []).append(field)
        for extendee, members in by_extendee.items():
            self.emit(depth, f"extend {extendee} {{")
            for field in members:
                self.field(depth + 1, field, {})
            self.emit(depth, "}")

    def reserved(self, depth: int, ranges: Any, names: Iterable[str], exclusive: bool) -> None:
        spans = [_range(r.start, r.end if exclusive else r.end + 1) for r in ranges]
        if spans:
            self.emit(depth, f"reserved {', '.join(spans)};")
        quoted = [_quote(n) for n in names]
        if quoted:
            self.emit(depth, f"reserved {', '.join(quoted)};")

    def service(self, service: pb.ServiceDescriptorProto) -> None:
        self.emit(0, f"service {service.name} {{")
        self.options(1, service.options)
        for method in service.method:
            into = "stream " if method.client_streaming else ""
            out = "stream " if method.server_streaming else ""
            head = (f"rpc {method.name}({into}{method.input_type}) "
                    f"returns ({out}{method.output_type})")
            options = _option_texts(method.options, (), self.normalize, self.pool)
            if options:
                self.emit(1, f"{head} {{")
                for text in options:
                    self.emit(2, f"option {text};")
                self.emit(1, "}")
            else:
                self.emit(1, f"{head};")
        self.emit(0, "}")


def _type(field: pb.FieldDescriptorProto) -> str:
    return SCALARS.get(field.type) or str(field.type_name)


def _range(start: int, end: int) -> str:
    """A descriptor range [start, end) as .proto writes it."""
    last = end - 1
    if last >= 536870911 or end >= 2**31 - 1:
        return f"{start} to max"
    return str(start) if last == start else f"{start} to {last}"


def _field_options(field: pb.FieldDescriptorProto,
                   pool: descriptor_pool.DescriptorPool | None) -> list[str]:
    options = []
    if field.HasField("default_value"):
        options.append(f"default = {_default(field)}")
    if field.HasField("json_name") and field.json_name != _json_name(field.name):
        options.append(f"json_name = {_quote(field.json_name)}")
    options += _option_texts(field.options, (), False, pool)
    return options


def _default(field: pb.FieldDescriptorProto) -> str:
    value = field.default_value
    if field.type == F.TYPE_STRING:
        return _quote(value)
    if field.type == F.TYPE_BYTES:
        return '"' + str(value).replace('"', '\\"') + '"'  # already C-escaped in descriptors
    return str(value)


def _json_name(name: str) -> str:
    parts = name.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def _option_texts(options: Any, skip: Iterable[str], normalize: bool,
                  pool: descriptor_pool.DescriptorPool | None = None) -> list[str]:
    texts = []
    if pool is not None and len(unknown_fields.UnknownFieldSet(options)):
        options = _extended(options, pool)
    for descriptor, value in options.ListFields():
        if descriptor.name in ("uninterpreted_option", "features", *skip):
            continue
        name = f"({descriptor.full_name})" if descriptor.is_extension else descriptor.name
        values = value if descriptor.is_repeated else [value]
        texts += [f"{name} = {_value(descriptor, v)}" for v in values]
    return sorted(texts) if normalize else texts


def _extended(options: Any, pool: descriptor_pool.DescriptorPool) -> Any:
    """`options` read again as the pool's own options message, in which the extensions
    its files declare are known (those the pool does not know stay unknown, and unsaid)."""
    try:
        own = pool.FindMessageTypeByName(options.DESCRIPTOR.full_name)
    except KeyError:
        return options
    return message_factory.GetMessageClass(own).FromString(options.SerializeToString())


def _value(descriptor: FieldDescriptor, value: Any) -> str:
    if descriptor.type == FieldDescriptor.TYPE_BOOL:
        return "true" if value else "false"
    if descriptor.type == FieldDescriptor.TYPE_ENUM and descriptor.enum_type is not None:
        found = descriptor.enum_type.values_by_number.get(value)
        return str(found.name) if found is not None else str(value)
    if descriptor.type == FieldDescriptor.TYPE_STRING:
        return _quote(value)
    if descriptor.type == FieldDescriptor.TYPE_BYTES:
        return _quote(value.decode("latin-1"))
    if descriptor.type == FieldDescriptor.TYPE_MESSAGE:
        from google.protobuf import text_format

        return "{ " + text_format.MessageToString(value, as_one_line=True) + " }"
    return repr(value)


def _quote(text: str) -> str:
    out = []
    for char in text:
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\{ord(char):03o}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'
