"""Protobuf compatibility by Confluent's published rules, our own implementation.

The writer's file (original) and the reader's (update) are compared message by message,
matched by name within their package (so a changed package is compatible), fields by
number (so a renamed field is compatible, and a renumbered one is a removal and an
addition). What the wire format can still read is compatible: added and removed fields,
messages and enums, enum constants, oneofs, a string, bytes or message field turning
repeated. Incompatible: a message removed, a field's kind changed (scalar, message, map),
a scalar moved out of its wire-compatible group, a message or enum field naming another
type, a numeric field's label changed, a proto2 required field added or removed, a oneof
losing a field, several existing fields moved into a new oneof or any into an existing
one. Map fields compare their key and value types.
"""

from __future__ import annotations

from collections.abc import Iterator

from google.protobuf import descriptor_pb2 as pb

from registry.compatibility import Incompatibility

F = pb.FieldDescriptorProto
COMPATIBLE = frozenset({
    "PACKAGE_CHANGED", "MESSAGE_ADDED", "MESSAGE_MOVED", "ENUM_ADDED", "ENUM_REMOVED",
    "ENUM_CONST_ADDED", "ENUM_CONST_CHANGED", "ENUM_CONST_REMOVED", "FIELD_ADDED",
    "FIELD_REMOVED", "FIELD_NAME_CHANGED", "FIELD_STRING_OR_BYTES_LABEL_CHANGED",
    "ONEOF_ADDED", "ONEOF_REMOVED", "ONEOF_FIELD_ADDED",
})  # fmt: skip
GROUPS = [
    {F.TYPE_INT32, F.TYPE_INT64, F.TYPE_UINT32, F.TYPE_UINT64, F.TYPE_BOOL, F.TYPE_ENUM},
    {F.TYPE_SINT32, F.TYPE_SINT64},
    {F.TYPE_STRING, F.TYPE_BYTES},
    {F.TYPE_FIXED32, F.TYPE_SFIXED32},
    {F.TYPE_FIXED64, F.TYPE_SFIXED64},
    {F.TYPE_FLOAT},
    {F.TYPE_DOUBLE},
]
LENGTH_DELIMITED = {F.TYPE_STRING, F.TYPE_BYTES, F.TYPE_MESSAGE}


def _group(kind: int) -> int:
    return next((i for i, group in enumerate(GROUPS) if kind in group), -1)


def reader_incompatibilities(
    reader: pb.FileDescriptorProto, writer: pb.FileDescriptorProto
) -> list[Incompatibility]:
    return [d for d in differences(reader, writer) if d.error_type not in COMPATIBLE]


def differences(
    reader: pb.FileDescriptorProto, writer: pb.FileDescriptorProto
) -> list[Incompatibility]:
    found = _Diff(writer, reader)
    found.compare()
    return found.found


def _messages(file: pb.FileDescriptorProto) -> dict[str, pb.DescriptorProto]:
    def walk(prefix: str, messages: list[pb.DescriptorProto]) -> Iterator[tuple[str,
                                                                                 pb.DescriptorProto]]:
        for message in messages:
            name = f"{prefix}{message.name}"
            yield name, message
            yield from walk(f"{name}.", list(message.nested_type))

    return dict(walk("", list(file.message_type)))


def _enums(file: pb.FileDescriptorProto) -> dict[str, pb.EnumDescriptorProto]:
    found = {e.name: e for e in file.enum_type}
    for name, message in _messages(file).items():
        found.update({f"{name}.{e.name}": e for e in message.enum_type})
    return found


class _Diff:
    def __init__(self, original: pb.FileDescriptorProto, update: pb.FileDescriptorProto) -> None:
        self.original, self.update = original, update
        self.found: list[Incompatibility] = []

    def add(self, kind: str, path: str, info: str = "") -> None:
        state = "compatible" if kind in COMPATIBLE else "incompatible"
        words = kind.lower().replace("_", " ")
        self.found.append(Incompatibility(kind, path, f"{words} at path '{path}' ({state})",
                                          info or path))

    def compare(self) -> None:
        if self.original.package != self.update.package:
            self.add("PACKAGE_CHANGED", "#/package")
        old, new = _messages(self.original), _messages(self.update)
        for name in old.keys() - new.keys():
            self.add("MESSAGE_REMOVED", f"#/{name}")
        for name in new.keys() - old.keys():
            self.add("MESSAGE_ADDED", f"#/{name}")
        for name in sorted(old.keys() & new.keys()):
            if not old[name].options.map_entry:
                self.message(name, old[name], new[name])
        self.enums()

    def enums(self) -> None:
        old, new = _enums(self.original), _enums(self.update)
        for name in old.keys() - new.keys():
            self.add("ENUM_REMOVED", f"#/{name}")
        for name in new.keys() - old.keys():
            self.add("ENUM_ADDED", f"#/{name}")
        for name in old.keys() & new.keys():
            before = {v.number: v.name for v in old[name].value}
            after = {v.number: v.name for v in new[name].value}
            for number in before.keys() - after.keys():
                self.add("ENUM_CONST_REMOVED", f"#/{name}/{number}")
            for number in after.keys() - before.keys():
                self.add("ENUM_CONST_ADDED", f"#/{name}/{number}")
            for number in before.keys() & after.keys():
                if before[number] != after[number]:
                    self.add("ENUM_CONST_CHANGED", f"#/{name}/{number}")

    def message(self, name: str, old: pb.DescriptorProto, new: pb.DescriptorProto) -> None:
        path = f"#/{name}"
        before = {f.number: f for f in old.field}
        after = {f.number: f for f in new.field}
        for number in sorted(before.keys() - after.keys()):
            self.removed(path, old, before[number])
        for number in sorted(after.keys() - before.keys()):
            self.added(path, new, after[number])
        for number in sorted(before.keys() & after.keys()):
            self.field(f"{path}/{number}", (old, before[number]), (new, after[number]))
        self.oneofs(path, old, new)

    def removed(self, path: str, message: pb.DescriptorProto, field: pb.FieldDescriptorProto
                ) -> None:
        here = f"{path}/{field.number}"
        if field.label == F.LABEL_REQUIRED:
            self.add("REQUIRED_FIELD_REMOVED", here)
        elif _real_oneof(field):
            self.add("ONEOF_FIELD_REMOVED", here)
        else:
            self.add("FIELD_REMOVED", here)

    def added(self, path: str, message: pb.DescriptorProto, field: pb.FieldDescriptorProto
              ) -> None:
        here = f"{path}/{field.number}"
        if field.label == F.LABEL_REQUIRED:
            self.add("REQUIRED_FIELD_ADDED", here)
        elif _real_oneof(field):
            self.add("ONEOF_FIELD_ADDED", here)
        else:
            self.add("FIELD_ADDED", here)

    def field(self, path: str, old_pair: tuple[pb.DescriptorProto, pb.FieldDescriptorProto],
              new_pair: tuple[pb.DescriptorProto, pb.FieldDescriptorProto]) -> None:
        (old_message, old), (new_message, new) = old_pair, new_pair
        if old.name != new.name:
            self.add("FIELD_NAME_CHANGED", path)
        old_kind, new_kind = self.kind(old_message, old), self.kind(new_message, new)
        if old_kind != new_kind:
            self.add("FIELD_KIND_CHANGED", path)
            return
        if old_kind == "map":
            self.map_types(path, old_message, old, new_message, new)
        else:
            self.types(path, old, new)
            self.label(path, old, new)

    def kind(self, message: pb.DescriptorProto, field: pb.FieldDescriptorProto) -> str:
        if field.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
            entry = _map_entry(message, field)
            return "map" if entry is not None else "message"
        return "scalar"

    def types(self, path: str, old: pb.FieldDescriptorProto, new: pb.FieldDescriptorProto
              ) -> None:
        if old.type in (F.TYPE_MESSAGE, F.TYPE_GROUP) or (
                old.type == F.TYPE_ENUM and new.type == F.TYPE_ENUM):
            if self.relative(old.type_name, self.original) != self.relative(new.type_name,
                                                                              self.update):
                self.add("FIELD_NAMED_TYPE_CHANGED", path)
        elif _group(old.type) != _group(new.type):
            self.add("FIELD_SCALAR_KIND_CHANGED", path)

    def label(self, path: str, old: pb.FieldDescriptorProto, new: pb.FieldDescriptorProto
              ) -> None:
        if old.label == new.label:
            return
        if F.LABEL_REQUIRED in (old.label, new.label):
            removed = old.label == F.LABEL_REQUIRED
            self.add("REQUIRED_FIELD_REMOVED" if removed else "REQUIRED_FIELD_ADDED", path)
        elif old.type in LENGTH_DELIMITED and new.type in LENGTH_DELIMITED:
            self.add("FIELD_STRING_OR_BYTES_LABEL_CHANGED", path)
        else:
            self.add("FIELD_NUMERIC_LABEL_CHANGED", path)

    def map_types(self, path: str, old_message: pb.DescriptorProto, old: pb.FieldDescriptorProto,
                  new_message: pb.DescriptorProto, new: pb.FieldDescriptorProto) -> None:
        old_entry, new_entry = _map_entry(old_message, old), _map_entry(new_message, new)
        assert old_entry is not None and new_entry is not None
        for index, part in ((0, "key"), (1, "value")):
            self.types(f"{path}/{part}", old_entry.field[index], new_entry.field[index])

    def oneofs(self, path: str, old: pb.DescriptorProto, new: pb.DescriptorProto) -> None:
        before = _oneof_members(old)
        after = _oneof_members(new)
        for name in before.keys() - after.keys():
            self.add("ONEOF_REMOVED", f"{path}/{name}")
        for name in after.keys() - before.keys():
            self.add("ONEOF_ADDED", f"{path}/{name}")
        plain_before = {f.number for f in old.field if not _real_oneof(f)}
        for name, members in after.items():
            moved = members & plain_before
            if not moved:
                continue
            if name in before:
                self.add("FIELD_MOVED_TO_EXISTING_ONEOF", f"{path}/{name}")
            elif len(moved) > 1:
                self.add("MULTIPLE_FIELDS_MOVED_TO_ONEOF", f"{path}/{name}")

    def relative(self, type_name: str, file: pb.FileDescriptorProto) -> str:
        prefix = f".{file.package}." if file.package else "."
        return type_name.removeprefix(prefix) if type_name.startswith(prefix) else type_name


def _real_oneof(field: pb.FieldDescriptorProto) -> bool:
    return field.HasField("oneof_index") and not field.proto3_optional


def _oneof_members(message: pb.DescriptorProto) -> dict[str, set[int]]:
    found: dict[str, set[int]] = {}
    for field in message.field:
        if _real_oneof(field):
            found.setdefault(message.oneof_decl[field.oneof_index].name, set()).add(field.number)
    return found


def _map_entry(message: pb.DescriptorProto, field: pb.FieldDescriptorProto
               ) -> pb.DescriptorProto | None:
    if field.label != F.LABEL_REPEATED:
        return None
    short = field.type_name.rsplit(".", 1)[-1]
    for nested in message.nested_type:
        if nested.name == short and nested.options.map_entry and field.type_name.endswith(
                f"{message.name}.{short}"):
            return nested
    return None
