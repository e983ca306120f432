"""`io.confluent.connect.protobuf.ProtobufConverter`: Connect data as Protobuf in Confluent's
wire format (after the schema id, the message indexes: zigzag varints, `[0]` written as the
single byte 0), with its schema in the registry.

A Connect struct becomes a proto3 message as Confluent's ProtobufData makes it: the
schema's name gives the package and the message (`ksql.users` is message `users` in
package `ksql`; unnamed: `ConnectDefault1`), fields are numbered in order from 1, int8,
int16 and int32 are `int32`, int64 `int64`, float32 `float`, float64 `double`, arrays
`repeated`, maps `map<string, V>`, nested structs nested messages. Connect's logical types
are messages, imported as built in (no reference): Decimal is `confluent.type.Decimal`
(the unscaled number as big-endian two's complement, its digit count and its scale) with
the schema's scale, and precision when it has one, in the field's `(confluent.field_meta)`
params; Date is `google.type.Date`, Time `google.type.TimeOfDay`, Timestamp
`google.protobuf.Timestamp`, to the millisecond as Connect's are. The file is registered
as a base64 `FileDescriptorProto`, which the registry takes as confluent-kafka's serializer
sends it. To read, the registry's `?format=serialized` descriptor (with its references,
each fetched the same way) is built into a descriptor pool of its own.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
from collections.abc import Mapping
from typing import Any

from google.protobuf import (  # the well-known types' modules fill the default pool
    any_pb2,  # noqa: F401
    descriptor_pb2,
    descriptor_pool,
    duration_pb2,  # noqa: F401
    empty_pb2,  # noqa: F401
    message_factory,
    struct_pb2,  # noqa: F401
    timestamp_pb2,  # noqa: F401
    wrappers_pb2,  # noqa: F401
)
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError, EncodeError, Message
from google.type import date_pb2, timeofday_pb2  # noqa: F401  (google/type/*, as above)

from connect import logical
from connect.api import DataException, Schema

from .registry import Registered, RegistryConverter

FDP = descriptor_pb2.FieldDescriptorProto
# Descriptors are typed loosely: types-protobuf's optional message/enum types and the upb
# classes the runtime hands out do not line up with what is checked before each use.
Descriptor = Any
Field = Any
SCALARS = {"int8": FDP.TYPE_INT32, "int16": FDP.TYPE_INT32, "int32": FDP.TYPE_INT32,
           "int64": FDP.TYPE_INT64, "float32": FDP.TYPE_FLOAT, "float64": FDP.TYPE_DOUBLE,
           "boolean": FDP.TYPE_BOOL, "string": FDP.TYPE_STRING, "bytes": FDP.TYPE_BYTES}
FROM_PROTO = {
    FieldDescriptor.TYPE_INT32: "int32", FieldDescriptor.TYPE_SINT32: "int32",
    FieldDescriptor.TYPE_SFIXED32: "int32", FieldDescriptor.TYPE_UINT32: "int64",
    FieldDescriptor.TYPE_FIXED32: "int64", FieldDescriptor.TYPE_INT64: "int64",
    FieldDescriptor.TYPE_SINT64: "int64", FieldDescriptor.TYPE_SFIXED64: "int64",
    FieldDescriptor.TYPE_UINT64: "int64", FieldDescriptor.TYPE_FIXED64: "int64",
    FieldDescriptor.TYPE_FLOAT: "float32", FieldDescriptor.TYPE_DOUBLE: "float64",
    FieldDescriptor.TYPE_BOOL: "boolean", FieldDescriptor.TYPE_STRING: "string",
    FieldDescriptor.TYPE_BYTES: "bytes", FieldDescriptor.TYPE_ENUM: "string",
}


def file_for(schema: Schema) -> descriptor_pb2.FileDescriptorProto:
    """The proto3 file of a Connect struct: one top-level message, nested ones inside."""
    if schema.type != "struct":
        raise DataException(f"ProtobufConverter writes structs, not {schema.type}")
    package, _, name = (schema.name or "").rpartition(".")
    file = descriptor_pb2.FileDescriptorProto(name=f"{name or 'ConnectDefault1'}.proto",
                                              syntax="proto3", package=package)
    _message(file.message_type.add(), name or "ConnectDefault1", schema,
             f".{package}." if package else ".", file)
    return file


def _message(message: descriptor_pb2.DescriptorProto, name: str, schema: Schema,
             scope: str, file: descriptor_pb2.FileDescriptorProto) -> None:
    message.name = name
    full = f"{scope}{name}"
    for number, (field_name, field_schema) in enumerate(schema.fields, 1):
        field = message.field.add(name=field_name, number=number, label=FDP.LABEL_OPTIONAL,
                                  json_name=field_name)
        item = field_schema
        if field_schema.type == "array":
            field.label = FDP.LABEL_REPEATED
            item = field_schema.items or Schema("string")
            if item.type in ("array", "map"):
                raise DataException("ProtobufConverter cannot write an array of arrays or maps")
        if logical.is_logical(item):
            _logical_field(field, item, file)
        elif item.type == "map":
            _map_entry(message, field, field_name, item, full, file)
        elif item.type == "struct":
            nested = _nested_name(item.name or field_name, schema)
            _message(message.nested_type.add(), nested, item, full + ".", file)
            field.type, field.type_name = FDP.TYPE_MESSAGE, f"{full}.{nested}"
        elif item.type in SCALARS:
            field.type = SCALARS[item.type]
        else:
            raise DataException(f"ProtobufConverter cannot write Connect type {item.type}")


def _nested_name(name: str, parent: Schema) -> str:
    """A nested message's name: the struct's own, capitalized if a field of the message
    around it has that name (protoc refuses a field and a type of one name)."""
    name = name.rpartition(".")[2]
    fields = {f for f, _ in parent.fields}
    while name in fields:
        name = name[:1].upper() + name[1:] if name[:1].islower() else name + "Message"
    return name


def _logical_field(field: Any, schema: Schema, file: descriptor_pb2.FileDescriptorProto
                   ) -> None:
    """A field of a Connect logical type: its message, imported, and for a Decimal the
    scale and precision as Confluent's field options."""
    type_name, location = LOGICAL_TYPES[str(schema.name)]
    field.type, field.type_name = FDP.TYPE_MESSAGE, type_name
    _import(file, location)
    if schema.name == logical.DECIMAL:
        params = {}
        precision = dict(schema.parameters).get(PRECISION_PARAM)
        if precision is not None:
            params["precision"] = precision
        params["scale"] = str(logical.scale_of(schema))
        _import(file, META_FILE)
        options = _FIELD_OPTIONS()
        options.Extensions[_FIELD_META].params.update(params)
        field.options.MergeFromString(options.SerializeToString())


def _import(file: descriptor_pb2.FileDescriptorProto, location: str) -> None:
    if location not in file.dependency:
        file.dependency.append(location)


def _map_entry(message: descriptor_pb2.DescriptorProto, field: Any, field_name: str,
               schema: Schema, full: str, file: descriptor_pb2.FileDescriptorProto) -> None:
    entry = message.nested_type.add(name=f"{field_name.title().replace('_', '')}Entry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, label=FDP.LABEL_OPTIONAL, type=FDP.TYPE_STRING,
                    json_name="key")
    values = schema.items or Schema("string")
    value_field = entry.field.add(name="value", number=2, label=FDP.LABEL_OPTIONAL,
                                  json_name="value")
    if logical.is_logical(values):
        _logical_field(value_field, values, file)
    elif values.type == "struct":
        nested = (values.name or "Value").rpartition(".")[2]
        _message(entry.nested_type.add(), nested, values, f"{full}.{entry.name}.", file)
        value_field.type = FDP.TYPE_MESSAGE
        value_field.type_name = f"{full}.{entry.name}.{nested}"
    elif values.type in SCALARS:
        value_field.type = SCALARS[values.type]
    else:
        raise DataException(f"ProtobufConverter cannot write map values of type {values.type}")
    field.label, field.type = FDP.LABEL_REPEATED, FDP.TYPE_MESSAGE
    field.type_name = f"{full}.{entry.name}"


def to_connect_schema(descriptor: Descriptor, optional: bool = False) -> Schema:
    fields = []
    for field in descriptor.fields:
        fields.append((field.name, _field_schema(field)))
    return Schema("struct", optional, descriptor.full_name, tuple(fields))


def _repeated(field: Field) -> bool:
    """protobuf 6 has `is_repeated` (and deprecates `label`); 5 has only `label`."""
    repeated = getattr(field, "is_repeated", None)
    if repeated is not None:
        return bool(repeated)
    return bool(field.label == FDP.LABEL_REPEATED)


def _is_map(field: Field) -> bool:
    return bool(field.type == FieldDescriptor.TYPE_MESSAGE
                and field.message_type.GetOptions().map_entry)


def _field_schema(field: Field) -> Schema:
    if _is_map(field):
        value = field.message_type.fields_by_name["value"]
        return Schema("map", True, items=_single(value))
    single = _single(field)
    if _repeated(field):
        return Schema("array", True, items=single)
    return single


def _single(field: Field) -> Schema:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        if field.message_type.full_name == DECIMAL_TYPE:
            return _decimal_schema(field)
        known = LOGICAL_MESSAGES.get(field.message_type.full_name)
        if known is not None:
            return known
        return to_connect_schema(field.message_type, optional=True)
    return Schema(FROM_PROTO.get(field.type, "string"), True)


def fill(message: Message, value: Mapping[str, Any]) -> None:
    """Set a message's fields from a Connect struct's value."""
    descriptor = message.DESCRIPTOR
    for name, item in value.items():
        if item is None:
            continue
        field = descriptor.fields_by_name.get(name)
        if field is None:
            raise DataException(f"Message {descriptor.full_name} has no field {name}")
        target = getattr(message, name)
        if _is_map(field):
            _fill_map(field, target, item)
        elif _repeated(field):
            for element in item:
                if field.type == FieldDescriptor.TYPE_MESSAGE:
                    _fill_message(field, target.add(), element)
                else:
                    target.append(element)
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            _fill_message(field, target, item)
        else:
            setattr(message, name, item)


def _fill_message(field: Field, target: Any, item: Any) -> None:
    name = field.message_type.full_name
    if name == DECIMAL_TYPE or name in LOGICAL_MESSAGES:
        try:
            _fill_logical(field, name, target, item)
        except (DataException, OverflowError) as exc:  # OverflowError: a date past year 9999
            raise DataException(f"Field {field.name}: {exc}") from exc
    else:
        fill(target, item)


def _fill_map(field: Field, target: Any, item: Mapping[str, Any]) -> None:
    value_field = field.message_type.fields_by_name["value"]
    nested = value_field.type == FieldDescriptor.TYPE_MESSAGE
    for key, element in item.items():
        if nested:
            _fill_message(value_field, target[key], element)
        else:
            target[key] = element


def read(message: Message) -> dict[str, Any]:
    """A message as a Connect struct's value: every field, enums by name."""
    out: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        if _unset_logical(message, field):
            out[field.name] = None  # as Confluent reads an absent message field
        else:
            out[field.name] = _read_field(field, getattr(message, field.name))
    return out


def _unset_logical(message: Message, field: Field) -> bool:
    """A logical type's message field that was not written (midnight's TimeOfDay, all
    zero, was: presence tells them apart)."""
    return (field.type == FieldDescriptor.TYPE_MESSAGE and not _repeated(field)
            and (field.message_type.full_name in LOGICAL_MESSAGES
                 or field.message_type.full_name == DECIMAL_TYPE)
            and not message.HasField(field.name))


def _read_field(field: Field, value: Any) -> Any:
    if _is_map(field):
        value_field = field.message_type.fields_by_name["value"]
        return {k: _read_single(value_field, v) for k, v in value.items()}
    if _repeated(field):
        return [_read_single(field, v) for v in value]
    return _read_single(field, value)


def _read_single(field: Field, value: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        if field.message_type.full_name in LOGICAL_MESSAGES or \
                field.message_type.full_name == DECIMAL_TYPE:
            return _read_logical(field.message_type.full_name, value)
        return read(value)
    if field.type == FieldDescriptor.TYPE_ENUM:
        found = field.enum_type.values_by_number.get(value)
        return found.name if found is not None else value
    return value


# The messages Confluent's ProtobufData writes for Connect's Date, Time and Timestamp, and
# reads as them. confluent.type.Decimal is apart: its Connect schema's scale and precision
# are in the field's options (`_decimal_schema`).
LOGICAL_MESSAGES = {
    "google.type.Date": logical.date_schema(optional=True),
    "google.type.TimeOfDay": logical.time_schema(optional=True),
    "google.protobuf.Timestamp": logical.timestamp_schema(optional=True),
}
DECIMAL_TYPE = "confluent.type.Decimal"
DECIMAL_FILE = "confluent/type/decimal.proto"
META_FILE = "confluent/meta.proto"
PRECISION_PARAM = "connect.decimal.precision"  # Confluent's Connect name for it
LOGICAL_TYPES = {  # Connect's logical name -> the message's type name, and its file
    logical.DECIMAL: (f".{DECIMAL_TYPE}", DECIMAL_FILE),
    logical.DATE: (".google.type.Date", "google/type/date.proto"),
    logical.TIME: (".google.type.TimeOfDay", "google/type/timeofday.proto"),
    logical.TIMESTAMP: (".google.protobuf.Timestamp", "google/protobuf/timestamp.proto"),
}
MS_PER_DAY = 86_400_000


def _field(message: descriptor_pb2.DescriptorProto, name: str, number: int, kind: int,
           type_name: str = "", repeated: bool = False) -> None:
    field = message.field.add(name=name, number=number, type=kind, json_name=name,
                              label=FDP.LABEL_REPEATED if repeated else FDP.LABEL_OPTIONAL)
    if type_name:
        field.type_name = type_name


def confluent_files() -> dict[str, descriptor_pb2.FileDescriptorProto]:
    """Confluent's `confluent/meta.proto` and `confluent/type/decimal.proto`, which its
    clients take as built in, declared as Confluent declares them (packages, names,
    numbers, types)."""
    meta = descriptor_pb2.FileDescriptorProto(
        name=META_FILE, package="confluent", syntax="proto3",
        dependency=["google/protobuf/descriptor.proto"])
    message = meta.message_type.add(name="Meta")
    _field(message, "doc", 1, FDP.TYPE_STRING)
    _field(message, "params", 2, FDP.TYPE_MESSAGE, ".confluent.Meta.ParamsEntry", True)
    _field(message, "tags", 3, FDP.TYPE_STRING, repeated=True)
    _field(message, "rules", 4, FDP.TYPE_MESSAGE, ".confluent.Rule", True)
    entry = message.nested_type.add(name="ParamsEntry")
    entry.options.map_entry = True
    _field(entry, "key", 1, FDP.TYPE_STRING)
    _field(entry, "value", 2, FDP.TYPE_STRING)
    rule = meta.message_type.add(name="Rule")
    for number, name in enumerate(("name", "doc", "expr", "sql"), 1):
        _field(rule, name, number, FDP.TYPE_STRING)
    for name, options in (("file_meta", "File"), ("message_meta", "Message"),
                          ("field_meta", "Field"), ("enum_meta", "Enum"),
                          ("enum_value_meta", "EnumValue")):
        meta.extension.add(name=name, number=1088, label=FDP.LABEL_OPTIONAL,
                           type=FDP.TYPE_MESSAGE, type_name=".confluent.Meta",
                           extendee=f".google.protobuf.{options}Options", json_name=name)
    decimal_file = descriptor_pb2.FileDescriptorProto(
        name=DECIMAL_FILE, package="confluent.type", syntax="proto3")
    decimal_message = decimal_file.message_type.add(name="Decimal")
    _field(decimal_message, "value", 1, FDP.TYPE_BYTES)
    _field(decimal_message, "precision", 2, FDP.TYPE_UINT32)
    _field(decimal_message, "scale", 3, FDP.TYPE_INT32)
    return {META_FILE: meta, DECIMAL_FILE: decimal_file}


CONFLUENT_FILES = confluent_files()
# FieldOptions in a pool of their own that knows `(confluent.field_meta)`: what this module
# writes a Decimal's options with, and reads any field's options again with (a pool that
# does not know the extension keeps it as an unknown field).
_OPTIONS_POOL = descriptor_pool.DescriptorPool()
_OPTIONS_POOL.AddSerializedFile(descriptor_pb2.DESCRIPTOR.serialized_pb)
_OPTIONS_POOL.Add(CONFLUENT_FILES[META_FILE])
_FIELD_OPTIONS: Any = message_factory.GetMessageClass(
    _OPTIONS_POOL.FindMessageTypeByName("google.protobuf.FieldOptions"))
_FIELD_META = _OPTIONS_POOL.FindExtensionByName("confluent.field_meta")


def _meta_params(field: Field) -> dict[str, str]:
    """The field's `(confluent.field_meta)` params, as Confluent's converter reads them."""
    options = _FIELD_OPTIONS.FromString(field.GetOptions().SerializeToString())
    return dict(options.Extensions[_FIELD_META].params)


def _decimal_schema(field: Field) -> Schema:
    """Confluent's rule: the scale from the field's params (0 without), the precision kept
    as `connect.decimal.precision`; a param that is no number is left out."""
    params = _meta_params(field)
    scale = _int_param(params, "scale") or 0
    precision = _int_param(params, "precision")
    extra = ((PRECISION_PARAM, str(precision)),) if precision is not None else ()
    return logical.decimal_schema(scale, optional=True, extra=extra)


def _int_param(params: Mapping[str, str], key: str) -> int | None:
    try:
        return int(params[key])
    except (KeyError, ValueError):
        return None


def _fill_logical(field: Field, name: str, message: Any, value: Any) -> None:
    """A Connect logical value as its message: a Decimal at the field's scale (the value's
    own when the field declares none, as Confluent writes a BigDecimal), checked against
    the field's precision; the others to the millisecond."""
    if name == DECIMAL_TYPE:
        params = _meta_params(field)
        number = _decimal(value, _int_param(params, "scale"))
        _, digits, exponent = number.as_tuple()
        precision = _int_param(params, "precision")
        if precision is not None and len(digits) > precision:
            raise DataException(f"Decimal {value} has {len(digits)} digits, more than the "
                                f"schema's precision of {precision}")
        message.value = logical.decimal_bytes(number, -int(exponent))
        message.precision, message.scale = len(digits), -int(exponent)
    elif name == "google.type.Date":
        days = logical.to_primitive(logical.date_schema(), value)
        day = logical.from_primitive(logical.date_schema(), days)
        message.year, message.month, message.day = day.year, day.month, day.day
    elif name == "google.type.TimeOfDay":
        ms = logical.to_primitive(logical.time_schema(), value)
        if not 0 <= ms < MS_PER_DAY:
            raise DataException(f"Time {value} is not a time of day: it must be between 0 "
                                f"and {MS_PER_DAY} milliseconds")
        seconds, ms = divmod(ms, 1000)
        minutes, message.seconds = divmod(seconds, 60)
        message.hours, message.minutes = divmod(minutes, 60)
        message.nanos = ms * 1_000_000
    else:
        seconds, ms = divmod(logical.to_primitive(logical.timestamp_schema(), value), 1000)
        message.seconds, message.nanos = seconds, ms * 1_000_000


def _decimal(value: Any, scale: int | None) -> decimal.Decimal:
    """`value` (a Decimal, an int, or the unscaled bytes at `scale`) at `scale`, exactly."""
    if isinstance(value, bytes | bytearray) and scale is not None:
        return logical.bytes_decimal(bytes(value), scale)
    if isinstance(value, bool) or not isinstance(value, decimal.Decimal | int):
        raise DataException(f"Decimal needs a decimal.Decimal, not {type(value).__name__}")
    number = decimal.Decimal(value)
    if not number.is_finite():
        raise DataException(f"Decimal {value} is not a finite number")
    if scale is None:
        return number
    return logical.scaled(logical.unscaled(number, scale), scale)


def _read_logical(name: str, message: Any) -> Any:
    if name == DECIMAL_TYPE:
        unscaled = int.from_bytes(message.value, "big", signed=True)
        return logical.scaled(unscaled, message.scale)
    if name == "google.type.Date":
        return dt.date(message.year, message.month, message.day)
    if name == "google.type.TimeOfDay":
        return dt.time(message.hours, message.minutes, message.seconds,
                       message.nanos // 1000)
    return logical.EPOCH_UTC + dt.timedelta(seconds=message.seconds,
                                            microseconds=message.nanos // 1000)


def _varint(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)  # zigzag
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if at >= len(data):
            raise DataException("Protobuf message indexes end early")
        byte = data[at]
        result |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), at


def message_indexes(indexes: list[int]) -> bytes:
    if indexes == [0]:
        return b"\0"
    return _varint(len(indexes)) + b"".join(_varint(i) for i in indexes)


def read_indexes(data: bytes) -> tuple[list[int], int]:
    count, at = _read_varint(data, 0)
    if count == 0:
        return [0], at
    indexes = []
    for _ in range(count):
        index, at = _read_varint(data, at)
        indexes.append(index)
    return indexes, at


class ProtobufConverter(RegistryConverter):
    """Each schema is built in a descriptor pool of its own, with its imports: two versions
    of one message (or the schema written and the one read) declare the same names, which
    one pool refuses."""
    kafka_class = "io.confluent.connect.protobuf.ProtobufConverter"
    schema_type = "PROTOBUF"

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        super().configure(configs, is_key)
        self.files: dict[Schema, tuple[str, str | None]] = {}
        self.classes: dict[str, type[Message]] = {}  # by registered text, or id and indexes
        # A registered schema's file and its references' files (imports first).
        self.readers: dict[int, tuple[descriptor_pb2.FileDescriptorProto,
                                      list[descriptor_pb2.FileDescriptorProto]]] = {}
        self.built: dict[bytes, Any] = {}  # FileDescriptors by their serialized protos

    def schema_for(self, schema: Schema) -> tuple[str, str | None]:
        found = self.files.get(schema)
        if found is None:
            file = file_for(schema)
            name = ".".join(p for p in (file.package, file.message_type[0].name) if p)
            text = base64.b64encode(file.SerializeToString()).decode()
            found = self.files[schema] = (text, name)
        return found

    def _class(self, file: descriptor_pb2.FileDescriptorProto, index: list[int],
               imports: list[descriptor_pb2.FileDescriptorProto] | None = None
               ) -> type[Message]:
        imports = imports or []
        key = b"".join(f.SerializeToString() for f in (*imports, file))
        built = self.built.get(key)
        if built is None:
            pool = descriptor_pool.DescriptorPool()
            names: set[str] = set()
            try:
                for each in (*imports, file):
                    _add_well_known(pool, each, names)
                    if each.name not in names:
                        pool.Add(each)
                        names.add(each.name)
                built = self.built[key] = pool.FindFileByName(file.name)
            except (TypeError, ValueError, KeyError) as exc:
                raise DataException(f"The Protobuf schema does not build: {exc}") from exc
        descriptor = built.message_types_by_name[file.message_type[index[0]].name]
        for nested in index[1:]:
            descriptor = descriptor.nested_types[nested]
        return message_factory.GetMessageClass(descriptor)

    def encode(self, text: str, schema: Schema, value: Any) -> bytes:
        cls = self.classes.get(text)
        if cls is None:
            file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text))
            cls = self.classes[text] = self._class(file, [0])
        return self.encode_with(cls, schema, value)

    def parse_registered(self, registered: Registered) -> Any:
        if registered.schema_type != "PROTOBUF":
            raise DataException(f"Schema {registered.id} is {registered.schema_type}, "
                                "not PROTOBUF")
        file, imports = self._file(registered.id)
        return self._class(file, [0], imports)

    def encode_with(self, parsed: Any, schema: Schema, value: Any) -> bytes:
        message = parsed()
        try:
            fill(message, value)
            return message_indexes([0]) + bytes(message.SerializeToString())
        except (TypeError, ValueError, AttributeError, EncodeError) as exc:
            raise DataException(f"Failed to serialize Protobuf data: {exc}") from exc

    def _file(self, schema_id: int) -> tuple[descriptor_pb2.FileDescriptorProto,
                                             list[descriptor_pb2.FileDescriptorProto]]:
        found = self.readers.get(schema_id)
        if found is None:
            registered = self.registry.schema(schema_id, serialized=True)
            if registered.schema_type != "PROTOBUF":
                raise DataException(f"Schema {schema_id} is {registered.schema_type}, "
                                    "not PROTOBUF")
            imports: list[descriptor_pb2.FileDescriptorProto] = []
            self._add_references(registered, imports, set())
            found = self.readers[schema_id] = (descriptor_pb2.FileDescriptorProto.FromString(
                base64.b64decode(registered.text)), imports)
        return found

    def _add_references(self, registered: Registered,
                        imports: list[descriptor_pb2.FileDescriptorProto],
                        seen: set[str]) -> None:
        """Imports first: each reference's descriptor from the registry, under its name."""
        for reference in registered.references:
            name = str(reference["name"])
            if name in seen:
                continue
            seen.add(name)
            found = self.registry.version(str(reference["subject"]),
                                          int(reference["version"]), serialized=True)
            self._add_references(found, imports, seen)
            file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(found.text))
            file.name = name
            imports.append(file)

    def decode(self, schema_id: int, payload: bytes) -> tuple[Schema | None, Any]:
        indexes, at = read_indexes(payload)
        key = f"{schema_id}:{indexes}"
        cls = self.classes.get(key)
        if cls is None:
            file, imports = self._file(schema_id)
            if not file.message_type or indexes[0] >= len(file.message_type):
                raise DataException(f"Schema {schema_id} has no message at {indexes}")
            cls = self.classes[key] = self._class(file, indexes, imports)
        try:
            message = cls.FromString(payload[at:])
            value = read(message)  # ValueError: a google.type.Date of month 13, say
        except (DecodeError, ValueError, OverflowError) as exc:
            raise DataException(f"Failed to deserialize Protobuf data for schema id "
                                f"{schema_id}: {exc}") from exc
        return to_connect_schema(cls.DESCRIPTOR), value


def _add_well_known(pool: descriptor_pool.DescriptorPool,
                    file: descriptor_pb2.FileDescriptorProto, names: set[str]) -> None:
    """The imports Confluent treats as built in (`google/protobuf/*`, `google/type/*`,
    `confluent/*`), with their own imports first; others are the references' files."""
    for dependency in file.dependency:
        if dependency in names:
            continue
        known = CONFLUENT_FILES.get(dependency)
        if known is None and dependency.startswith(("google/protobuf/", "google/type/")):
            try:
                known = descriptor_pb2.FileDescriptorProto.FromString(
                    descriptor_pool.Default().FindFileByName(dependency).serialized_pb)
            except KeyError:
                continue  # the pool's Add names what is missing
        if known is None:
            continue
        _add_well_known(pool, known, names)
        pool.Add(known)
        names.add(dependency)
