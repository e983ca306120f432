"""Protobuf values as typed Spark columns following the message descriptor, and back.

A registered Protobuf schema is fetched as a ``FileDescriptorProto`` (``?format=serialized``),
its imports through the schema's references (each a subject version, fetched the same way)
and ``google/protobuf/*`` / ``google/type/*`` from the ``protobuf`` and
``googleapis-common-protos`` packages, and built into a descriptor pool per schema id: no
protoc on executors. Confluent's framing puts *message indexes* after the schema id (a
zig-zag varint count, then the indexes, the first among the file's top-level messages and
each next among the previous one's nested messages; ``[0]`` is written as one 0 byte).

Types map as Spark's ``from_protobuf`` does, with these choices: a message is a struct in
field-number order of declaration; ``repeated`` an array; a ``map<K, V>`` a ``MAP<K, V>``;
enums their value's name (STRING; an unknown number its decimal text); ``int32``/``sint32``/
``sfixed32`` INT, ``int64``/``sint64``/``sfixed64`` and ``uint32``/``fixed32`` BIGINT,
``uint64``/``fixed64`` DECIMAL(20,0), ``bytes`` BINARY. Well-known types:
``google.protobuf.Timestamp`` a TIMESTAMP, ``Duration`` an INTERVAL DAY TO SECOND, the
wrappers (``StringValue``...) a nullable scalar, ``Struct``/``Value``/``ListValue``/``Any``
the canonical JSON text. A field with presence (a message, proto2 ``optional``, proto3
``optional``, a oneof member) is null when unset; a proto3 scalar without presence is its
value, 0 or "" included (the wire cannot tell "unset" from the default). A recursive message
has no Spark type and is refused.
"""

from __future__ import annotations

import base64
import importlib
from collections.abc import Callable
from datetime import UTC
from decimal import Decimal
from typing import Any

from google.protobuf import descriptor_pb2 as pb
from google.protobuf import descriptor_pool, json_format, message_factory
from google.protobuf.descriptor import FieldDescriptor as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DayTimeIntervalType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from sparkkafka.schema_registry import RegisteredSchema, RegistryClient, SchemaError

Converter = Callable[[Any], Any]
# The descriptor classes' stubs make every nested descriptor optional; they are not here.
Descriptor = Any
FieldDescriptor = Any
_SCALARS: dict[int, DataType] = {
    F.TYPE_DOUBLE: DoubleType(),
    F.TYPE_FLOAT: FloatType(),
    F.TYPE_INT64: LongType(),
    F.TYPE_SINT64: LongType(),
    F.TYPE_SFIXED64: LongType(),
    F.TYPE_UINT64: DecimalType(20, 0),
    F.TYPE_FIXED64: DecimalType(20, 0),
    F.TYPE_INT32: IntegerType(),
    F.TYPE_SINT32: IntegerType(),
    F.TYPE_SFIXED32: IntegerType(),
    F.TYPE_UINT32: LongType(),
    F.TYPE_FIXED32: LongType(),
    F.TYPE_BOOL: BooleanType(),
    F.TYPE_STRING: StringType(),
    F.TYPE_BYTES: BinaryType(),
    F.TYPE_ENUM: StringType(),
}
_WRAPPERS = {
    "google.protobuf.DoubleValue": DoubleType(),
    "google.protobuf.FloatValue": FloatType(),
    "google.protobuf.Int64Value": LongType(),
    "google.protobuf.UInt64Value": DecimalType(20, 0),
    "google.protobuf.Int32Value": IntegerType(),
    "google.protobuf.UInt32Value": LongType(),
    "google.protobuf.BoolValue": BooleanType(),
    "google.protobuf.StringValue": StringType(),
    "google.protobuf.BytesValue": BinaryType(),
}
_AS_JSON = {
    "google.protobuf.Struct",
    "google.protobuf.Value",
    "google.protobuf.ListValue",
    "google.protobuf.Any",
}
TIMESTAMP = "google.protobuf.Timestamp"
DURATION = "google.protobuf.Duration"


# -- descriptors from the registry ------------------------------------------------------------


class Schemas:
    """Descriptor pools by schema id, built from the registry over HTTP (one per worker)."""

    def __init__(self, registry: RegistryClient) -> None:
        self.registry = registry
        self._files: dict[int, tuple[descriptor_pool.DescriptorPool, pb.FileDescriptorProto]] = {}

    def file(self, schema_id: int) -> tuple[descriptor_pool.DescriptorPool, pb.FileDescriptorProto]:
        found = self._files.get(schema_id)
        if found is None:
            schema = self.registry.by_id(schema_id)
            if schema.schema_type != "PROTOBUF":
                raise SchemaError(f"schema id {schema_id} is {schema.schema_type}, not PROTOBUF")
            found = self._files[schema_id] = self._build(schema)
        return found

    def message(self, schema_id: int, indexes: list[int]) -> Descriptor:
        pool, file = self.file(schema_id)
        return pool.FindMessageTypeByName(message_name(file, indexes))

    def _build(
        self, schema: RegisteredSchema
    ) -> tuple[descriptor_pool.DescriptorPool, pb.FileDescriptorProto]:
        pool = descriptor_pool.DescriptorPool()
        files: dict[str, pb.FileDescriptorProto] = {}
        pending = list(schema.references)
        while pending:
            reference = pending.pop()
            if reference.name in files:
                continue
            referenced = self.registry.version(reference.subject, reference.version)
            text = self.registry.serialized(reference.subject, reference.version, referenced.id)
            files[reference.name] = _file(text, reference.name)
            pending.extend(referenced.references)
        main = _file(self.registry.serialized(None, None, schema.id), f"millrace-{schema.id}.proto")
        added: set[str] = set()

        def add(file: pb.FileDescriptorProto) -> None:
            if file.name in added:
                return
            added.add(file.name)
            for name in file.dependency:
                add(files[name] if name in files else builtin(name))
            pool.Add(file)

        add(main)
        return pool, main


def _file(serialized: str, name: str) -> pb.FileDescriptorProto:
    file = pb.FileDescriptorProto()
    file.ParseFromString(base64.b64decode(serialized))
    file.name = name
    return file


def builtin(name: str) -> pb.FileDescriptorProto:
    """A well-known file from the Python packages that ship it (``google/protobuf/x.proto``
    is ``google.protobuf.x_pb2``)."""
    if not name.startswith(("google/protobuf/", "google/type/")):
        raise SchemaError(f"the schema imports {name}, which none of its references is")
    module = importlib.import_module(name.removesuffix(".proto").replace("/", ".") + "_pb2")
    file = pb.FileDescriptorProto()
    module.DESCRIPTOR.CopyToProto(file)
    return file


def read_message_indexes(body: bytes) -> tuple[list[int], bytes]:
    """The message indexes at the start of ``body`` (after magic byte and id), and the rest."""
    count, offset = _zigzag(body, 0)
    if count == 0:
        return [0], body[offset:]
    if not 0 < count <= 64:
        raise SchemaError(f"implausible message index count {count}")
    indexes = []
    for _ in range(count):
        index, offset = _zigzag(body, offset)
        indexes.append(index)
    return indexes, body[offset:]


def _zigzag(value: bytes, offset: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if offset >= len(value) or shift > 63:
            raise SchemaError("message indexes run past the value")
        byte = value[offset]
        offset += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), offset


def write_message_indexes(indexes: list[int]) -> bytes:
    if indexes == [0]:
        return b"\x00"
    return b"".join(_varint((n << 1) ^ (n >> 63)) for n in [len(indexes), *indexes])


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def message_name(file: pb.FileDescriptorProto, indexes: list[int]) -> str:
    messages = list(file.message_type)
    names: list[str] = [file.package] if file.package else []
    for index in indexes:
        if not 0 <= index < len(messages):
            raise SchemaError(f"no message at index {index} of {indexes}")
        names.append(messages[index].name)
        messages = list(messages[index].nested_type)
    return ".".join(names)


def message_indexes(file: pb.FileDescriptorProto, full_name: str | None) -> list[int]:
    """The indexes of message ``full_name`` (default: the file's first message)."""
    if full_name is None:
        if not file.message_type:
            raise SchemaError("the schema declares no message")
        return [0]
    prefix = f"{file.package}." if file.package else ""

    def search(messages: Any, scope: str) -> list[int] | None:
        for i, message in enumerate(messages):
            name = scope + message.name
            if name == full_name:
                return [i]
            if full_name.startswith(name + "."):
                inner = search(message.nested_type, name + ".")
                if inner is not None:
                    return [i, *inner]
        return None

    found = search(file.message_type, prefix)
    if found is None:
        raise SchemaError(f"the schema has no message {full_name}")
    return found


# -- reading ----------------------------------------------------------------------------------


def spark_type(message: Descriptor, seen: tuple[str, ...] = ()) -> StructType:
    """The struct for ``message`` (the module's docstring says how each field maps)."""
    if message.full_name in seen:
        raise SchemaError(f"message {message.full_name} is recursive; a Spark type cannot be")
    seen = (*seen, message.full_name)
    return StructType([StructField(f.name, _field_type(f, seen), True) for f in message.fields])


def _is_map(field: FieldDescriptor) -> bool:
    return bool(field.type == F.TYPE_MESSAGE and field.message_type.GetOptions().map_entry)


def _field_type(field: FieldDescriptor, seen: tuple[str, ...]) -> DataType:
    if _is_map(field):
        entry = field.message_type
        key = _value_type(entry.fields_by_name["key"], seen)
        return MapType(key, _value_type(entry.fields_by_name["value"], seen), True)
    kind = _value_type(field, seen)
    return ArrayType(kind, True) if _repeated(field) else kind


def _repeated(field: FieldDescriptor) -> bool:
    return bool(field.is_repeated)


def _value_type(field: FieldDescriptor, seen: tuple[str, ...]) -> DataType:
    if field.type not in (F.TYPE_MESSAGE, F.TYPE_GROUP):
        return _SCALARS[field.type]
    name = field.message_type.full_name
    if name == TIMESTAMP:
        return TimestampType()
    if name == DURATION:
        return DayTimeIntervalType()
    if name in _WRAPPERS:
        return _WRAPPERS[name]
    if name in _AS_JSON:
        return StringType()
    return spark_type(field.message_type, seen)


def converter(message: Descriptor, kind: StructType) -> Converter:
    """Message (of ``message``, the writer's) to a tuple of ``kind`` (the reader's struct):
    fields matched by name, a reader field the writer lacks is null."""
    fields: list[tuple[str, Converter] | None] = []
    for target in kind.fields:
        field = message.fields_by_name.get(target.name)
        fields.append(
            None if field is None else (field.name, _field_converter(field, target.dataType))
        )
    presence = {f.name for f in message.fields if f.has_presence and not _repeated(f)}

    def convert(msg: Any) -> tuple[Any, ...]:
        out: list[Any] = []
        for entry in fields:
            if entry is None:
                out.append(None)
                continue
            name, conv = entry
            if name in presence and not msg.HasField(name):
                out.append(None)
            else:
                out.append(conv(getattr(msg, name)))
        return tuple(out)

    return convert


def _field_converter(field: FieldDescriptor, kind: DataType) -> Converter:
    if _is_map(field):
        if not isinstance(kind, MapType):
            raise SchemaError(f"field {field.full_name} is a map, the reader's is not")
        entry = field.message_type
        key = _value_converter(entry.fields_by_name["key"], kind.keyType)
        value = _value_converter(entry.fields_by_name["value"], kind.valueType)
        return lambda v: {key(k): value(x) for k, x in v.items()}
    if _repeated(field):
        if not isinstance(kind, ArrayType):
            raise SchemaError(f"field {field.full_name} is repeated, the reader's is not")
        item = _value_converter(field, kind.elementType)
        return lambda v: [item(x) for x in v]
    return _value_converter(field, kind)


def _value_converter(field: FieldDescriptor, kind: DataType) -> Converter:
    if field.type == F.TYPE_ENUM:
        names = {v.number: v.name for v in field.enum_type.values}
        return lambda v: names.get(v, str(v))
    if field.type in (F.TYPE_UINT64, F.TYPE_FIXED64):
        return Decimal
    if field.type == F.TYPE_BYTES:
        return bytes
    if field.type not in (F.TYPE_MESSAGE, F.TYPE_GROUP):
        return lambda v: v
    name = field.message_type.full_name
    if name == TIMESTAMP:
        return lambda v: v.ToDatetime(tzinfo=UTC)
    if name == DURATION:
        return lambda v: v.ToTimedelta()
    if name in _WRAPPERS:
        return lambda v: v.value
    if name in _AS_JSON:
        return lambda v: json_format.MessageToJson(v, indent=None)
    if not isinstance(kind, StructType):
        raise SchemaError(f"field {field.full_name} is a message, the reader's is not a struct")
    return converter(field.message_type, kind)


def decoder(schemas: Schemas, kind: StructType, reader_name: str) -> Callable[[int, bytes], Any]:
    """(schema id, body after the id) to a tuple of ``kind``; a record of another message
    than ``reader_name`` is a SchemaError."""
    made: dict[tuple[int, tuple[int, ...]], tuple[Any, Converter]] = {}

    def decode(schema_id: int, body: bytes) -> Any:
        indexes, payload = read_message_indexes(body)
        key = (schema_id, tuple(indexes))
        if key not in made:
            message = schemas.message(schema_id, indexes)
            if message.full_name != reader_name:
                raise SchemaError(f"message {message.full_name}, not {reader_name}")
            made[key] = (message_factory.GetMessageClass(message), converter(message, kind))
        cls, convert = made[key]
        msg = cls()
        try:
            msg.ParseFromString(payload)
        except Exception as exc:  # DecodeError and the C implementation's own
            raise SchemaError(f"not a {reader_name}: {exc}") from exc
        return convert(msg)

    return decode


# -- writing ----------------------------------------------------------------------------------


def fill(msg: Any, value: dict[str, Any]) -> Any:
    """Set ``msg``'s fields from a Spark row as a dict (by field name; enums by name or
    number, timestamps as datetimes); unknown keys are a SchemaError."""
    descriptor = msg.DESCRIPTOR
    for name, item in value.items():
        field = descriptor.fields_by_name.get(name)
        if field is None:
            raise SchemaError(f"message {descriptor.full_name} has no field {name}")
        if item is None:
            continue
        if _is_map(field):
            target = getattr(msg, name)
            value_field = field.message_type.fields_by_name["value"]
            for k, v in item.items():
                if value_field.type == F.TYPE_MESSAGE:
                    _set_message(target[k], value_field, v)
                else:
                    target[k] = _scalar(value_field, v)
        elif _repeated(field):
            target = getattr(msg, name)
            for v in item:
                if field.type == F.TYPE_MESSAGE:
                    _set_message(target.add(), field, v)
                else:
                    target.append(_scalar(field, v))
        elif field.type == F.TYPE_MESSAGE:
            _set_message(getattr(msg, name), field, item)
        else:
            setattr(msg, name, _scalar(field, item))
    return msg


def _set_message(target: Any, field: FieldDescriptor, value: Any) -> None:
    name = field.message_type.full_name
    target.SetInParent()
    if name == TIMESTAMP:
        target.FromDatetime(value)
    elif name == DURATION:
        target.FromTimedelta(value)
    elif name in _WRAPPERS:
        target.value = _scalar(field.message_type.fields_by_name["value"], value)
    elif name in _AS_JSON:
        json_format.Parse(value, target)
    else:
        fill(target, value)


def _scalar(field: FieldDescriptor, value: Any) -> Any:
    if field.type == F.TYPE_ENUM and isinstance(value, str):
        found = field.enum_type.values_by_name.get(value)
        if found is None:
            raise SchemaError(f"enum {field.enum_type.full_name} has no value {value}")
        return found.number
    if field.type in (F.TYPE_UINT64, F.TYPE_FIXED64) and isinstance(value, Decimal):
        return int(value)
    if field.type == F.TYPE_BYTES:
        return bytes(value)
    return value


def proto_for(kind: StructType, message: str = "Value") -> str:
    """proto3 text for Spark rows of ``kind`` (``to_protobuf`` registers it when given no
    schema): one message, nested messages for structs, fields numbered in column order,
    ``optional`` for nullable scalars so null stays null, Timestamp for timestamps."""
    imports: set[str] = set()
    body = _message_text(kind, message, imports, "")
    head = ['syntax = "proto3";', *(f'import "{i}";' for i in sorted(imports)), ""]
    return "\n".join(head) + body


def _message_text(kind: StructType, name: str, imports: set[str], indent: str) -> str:
    lines = [f"{indent}message {name} {{"]
    for number, field in enumerate(kind.fields, start=1):
        dtype, label = field.dataType, ""
        if isinstance(dtype, ArrayType):
            dtype, label = dtype.elementType, "repeated "
        if isinstance(dtype, MapType):
            key = _proto_scalar(dtype.keyType, imports)
            value = _nested(dtype.valueType, field.name, imports, indent, lines)
            lines.append(f"{indent}  map<{key}, {value}> {field.name} = {number};")
            continue
        type_name = _nested(dtype, field.name, imports, indent, lines)
        if not label and field.nullable and not isinstance(dtype, (StructType, TimestampType)):
            label = "optional "
        lines.append(f"{indent}  {label}{type_name} {field.name} = {number};")
    lines.append(f"{indent}}}")
    return "\n".join(lines) + "\n"


def _nested(dtype: DataType, field: str, imports: set[str], indent: str, lines: list[str]) -> str:
    if isinstance(dtype, StructType):
        name = "".join(part.capitalize() for part in field.split("_")) or "Nested"
        lines.append(_message_text(dtype, name, imports, indent + "  ").rstrip("\n"))
        return name
    if isinstance(dtype, (ArrayType, MapType)):
        raise SchemaError(f"field {field}: Protobuf has no repeated of repeated or maps")
    return _proto_scalar(dtype, imports)


def _proto_scalar(dtype: DataType, imports: set[str]) -> str:
    if isinstance(dtype, (TimestampType, TimestampNTZType)):
        imports.add("google/protobuf/timestamp.proto")
        return TIMESTAMP
    if isinstance(dtype, DayTimeIntervalType):
        imports.add("google/protobuf/duration.proto")
        return DURATION
    names: list[tuple[type, str]] = [
        (LongType, "int64"), (IntegerType, "int32"), (ShortType, "int32"), (ByteType, "int32"),
        (DoubleType, "double"), (FloatType, "float"), (BooleanType, "bool"),
        (StringType, "string"), (BinaryType, "bytes"),
    ]  # fmt: skip
    for spark, proto in names:
        if isinstance(dtype, spark):
            return proto
    raise SchemaError(f"no Protobuf type for Spark type {dtype.simpleString()}; cast it")
