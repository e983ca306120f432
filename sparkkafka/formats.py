"""Avro, JSON Schema and Protobuf columns through a schema registry: decode on read, encode
on write, in Confluent's wire format. The public helpers of the connector's schema side.

Reading (``decode_column``, ``from_avro``, ``from_json_schema``, ``from_protobuf``): the
reader schema is the latest under a subject, or one schema id, fetched once on the driver;
it fixes the column's Spark type (``value_type``). Each record is ``0x00``, its writer
schema's id (4 bytes big-endian), for Protobuf the message indexes, then the body. A record
whose id is not one of the subject's versions (or not the given id), whose schema is of
another format, or that does not decode, is a bad record: ``mode="FAILFAST"`` (the default,
as Spark's ``from_avro``) fails the query naming the cause; ``mode="PERMISSIVE"`` makes its
value null. Avro values are read with their writer schema resolved to the reader's (older
records get new fields' defaults), Protobuf values with the writer's descriptor, fields
matched to the reader's struct by name; JSON values are checked against the reader's types.

Writing (``encode_column``, ``to_avro``, ``to_json_schema``, ``to_protobuf``): a struct (or
scalar) column becomes BINARY wire-format bytes for the sink's ``value`` or ``key``. The id is
settled once on the driver: ``schema_id`` as given, else ``schema`` registered under the
subject (``auto_register=True``, as Confluent's serializers' ``auto.register.schemas``) or
looked up there, else the subject's latest version (``use.latest.version``). ``schema_for``
derives a schema from a Spark type. JSON values are validated against the schema before
they are written, as Confluent's JSONSerializer does; a row that cannot be encoded fails
the write naming why.

Executors build decoders and encoders once per Python worker (Spark reuses workers across
tasks), and fetch each writer schema once by id; they run as Arrow UDFs, a batch at a time.
Everything here talks to the registry over HTTP (``schema_registry.py``), never through the
platform's registry app, so executors need no Django.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from pyspark.sql.types import BinaryType, DataType, StructType

from sparkkafka import avro_columns, json_schema_columns, protobuf_columns
from sparkkafka.schema_registry import (
    AVRO,
    JSON,
    PROTOBUF,
    RegisteredSchema,
    RegistryClient,
    RegistryLike,
    SchemaError,
    as_registry,
    split_wire,
    wire_prefix,
)

MODES = ("FAILFAST", "PERMISSIVE")
Decode = Callable[[bytes | None], Any]
Encode = Callable[[Any], bytes | None]

__all__ = [
    "MODES",
    "RecordDecoder",
    "SchemaError",
    "decode_column",
    "encode_column",
    "from_avro",
    "from_json_schema",
    "from_protobuf",
    "reader_schema",
    "record_decoder",
    "schema_for",
    "to_avro",
    "to_json_schema",
    "to_protobuf",
    "value_type",
    "writer_schema",
]


# -- reading ----------------------------------------------------------------------------------


def reader_schema(
    registry_url: RegistryLike, subject: str | None = None, schema_id: int | None = None
) -> RegisteredSchema:
    """The schema a decoder reads into: ``schema_id``'s, else the latest under ``subject``."""
    client = RegistryClient.of(registry_url)
    if schema_id is not None:
        return client.by_id(schema_id)
    if subject is None:
        raise SchemaError("give a subject or a schema id")
    return client.latest(subject)


def value_type(
    registry_url: RegistryLike,
    subject: str | None = None,
    schema_id: int | None = None,
    message: str | None = None,
) -> DataType:
    """The Spark type ``decode_column`` gives the same arguments (for views and forms)."""
    schema = reader_schema(registry_url, subject, schema_id)
    return _reader(RegistryClient.of(registry_url), schema, message)[0]


def _reader(
    client: RegistryClient, schema: RegisteredSchema, message: str | None
) -> tuple[DataType, str | None]:
    """The reader's Spark type and, for Protobuf, its message's full name."""
    if schema.schema_type == AVRO:
        return avro_columns.spark_type(json.loads(schema.text)), None
    if schema.schema_type == JSON:
        resolver = json_schema_columns.Resolver.of(client, schema)
        return json_schema_columns.spark_type(resolver.root, resolver), None
    if schema.schema_type == PROTOBUF:
        schemas = protobuf_columns.Schemas(client)
        _, file = schemas.file(schema.id)
        descriptor = schemas.message(schema.id, protobuf_columns.message_indexes(file, message))
        return protobuf_columns.spark_type(descriptor), descriptor.full_name
    raise SchemaError(f"schema type {schema.schema_type} is not one this connector reads")


def record_decoder(
    registry_url: RegistryLike,
    subject: str | None = None,
    *,
    schema_id: int | None = None,
    message: str | None = None,
    mode: str = "FAILFAST",
    expected_type: str | None = None,
    also_subjects: tuple[str, ...] = (),
) -> RecordDecoder:
    """A picklable decoder of wire-format values into ``decoder.kind`` (the reader schema's
    Spark type), settled on the driver; ``decode_column`` and the Data Source's
    ``valueFormat`` use it. Call it with bytes (or None) on an executor. A record's schema
    id must be a version of ``subject`` or of one of ``also_subjects``."""
    mode = _mode(mode)
    schema = reader_schema(registry_url, subject, schema_id)
    if expected_type is not None and schema.schema_type != expected_type:
        raise SchemaError(
            f"{subject or schema_id} is a {schema.schema_type} schema, not {expected_type}"
        )
    kind, message_name = _reader(RegistryClient.of(registry_url), schema, message)
    subjects = () if subject is None else (subject, *also_subjects)
    return RecordDecoder(registry_url, subjects, schema_id, schema, kind, message_name, mode)


def decode_column(
    column: Any,
    subject: str | None = None,
    registry_url: RegistryLike | None = None,
    *,
    schema_id: int | None = None,
    message: str | None = None,
    mode: str = "FAILFAST",
    expected_type: str | None = None,
) -> Any:
    """A column of wire-format bytes (BINARY, or its name) decoded to the reader schema's Spark
    type, whatever the schema's format (``AVRO``, ``JSON``, ``PROTOBUF``). ``message`` picks a
    Protobuf schema's message by full name (default: its first); ``mode`` is FAILFAST or
    PERMISSIVE (bad records null). Batch and streaming frames alike."""
    from pyspark.sql import functions as F

    if registry_url is None:
        raise SchemaError("give registry_url")
    decoder = record_decoder(
        registry_url,
        subject,
        schema_id=schema_id,
        message=message,
        mode=mode,
        expected_type=expected_type,
    )
    target = F.col(column) if isinstance(column, str) else column
    return _arrow_udf(decoder.decode_batch, decoder.kind)(target)


def from_avro(
    column: Any, subject: str | None, registry_url: RegistryLike, **options: Any
) -> Any:
    """Spark's ``from_avro`` for the Confluent wire format, by subject (or ``schema_id=``)."""
    return decode_column(column, subject, registry_url, expected_type=AVRO, **options)


def from_json_schema(
    column: Any, subject: str | None, registry_url: RegistryLike, **options: Any
) -> Any:
    """JSON Schema values to a typed column (``json_schema_columns`` says how types map)."""
    return decode_column(column, subject, registry_url, expected_type=JSON, **options)


def from_protobuf(
    column: Any, subject: str | None, registry_url: RegistryLike, **options: Any
) -> Any:
    """Protobuf values to a struct following the message (``protobuf_columns`` says how)."""
    return decode_column(column, subject, registry_url, expected_type=PROTOBUF, **options)


def _mode(mode: str) -> str:
    if mode.upper() not in MODES:
        raise SchemaError(f"mode {mode!r}: FAILFAST or PERMISSIVE")
    return mode.upper()


class RecordDecoder:
    """What a decoding UDF ships to executors; the decoder itself is built there, once per
    Python worker, and fetches writer schemas by id as it meets them."""

    def __init__(
        self,
        registry_url: RegistryLike,
        subjects: tuple[str, ...],
        schema_id: int | None,
        reader: RegisteredSchema,
        kind: DataType,
        message: str | None,
        mode: str,
    ) -> None:
        self.registry = as_registry(registry_url)  # picklable, login and CA included
        self.subjects = subjects
        self.schema_id = schema_id
        self.reader = reader
        self.kind = kind
        self.message = message
        self.mode = mode
        self._decode: Decode | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_decode": None}

    def __call__(self, raw: bytes | None) -> Any:
        if self._decode is None:
            self._decode = self._decoder()
        return self._decode(raw)

    def decode_batch(self, values: pa.Array) -> pa.Array:
        out = [self(v) for v in values.to_pylist()]
        return pa.array(out, type=_arrow_type(self.kind))

    def _decoder(self) -> Decode:
        client = RegistryClient.of(self.registry)
        body = self._body_decoder(client)
        permissive = self.mode == "PERMISSIVE"
        expected = self.reader.schema_type

        def decode(raw: bytes | None) -> Any:
            if raw is None:
                return None
            try:
                schema_id, rest = split_wire(raw)
                self._check_writer(client, schema_id, expected)
                return body(schema_id, rest)
            except (SchemaError, avro_columns.AvroError) as exc:
                if permissive:
                    return None
                raise SchemaError(f"{exc} (mode=FAILFAST; PERMISSIVE makes it null)") from exc

        return decode

    def _check_writer(self, client: RegistryClient, schema_id: int, expected: str) -> None:
        if self.schema_id is not None and schema_id != self.schema_id:
            raise SchemaError(f"record written with schema id {schema_id}, not {self.schema_id}")
        if self.schema_id is None and not any(
            client.in_subject(schema_id, s) for s in self.subjects
        ):
            raise SchemaError(
                f"schema id {schema_id} is not a version of {' or '.join(self.subjects)}"
            )
        writer_type = client.by_id(schema_id).schema_type
        if writer_type != expected:
            raise SchemaError(f"schema id {schema_id} is {writer_type}, not {expected}")

    def _body_decoder(self, client: RegistryClient) -> Callable[[int, bytes], Any]:
        if self.reader.schema_type == AVRO:
            import fastavro

            parsed: dict[int, Any] = {}

            def writer_of(schema_id: int) -> Any:
                if schema_id not in parsed:
                    text = json.loads(client.by_id(schema_id).text)
                    parsed[schema_id] = fastavro.parse_schema(text)
                return parsed[schema_id]

            return avro_columns.body_decoder(writer_of, json.loads(self.reader.text))
        if self.reader.schema_type == JSON:
            read_json = json_schema_columns.decoder(self.kind)
            return lambda _id, body: read_json(body)
        assert isinstance(self.kind, StructType) and self.message is not None
        schemas = protobuf_columns.Schemas(client)
        return protobuf_columns.decoder(schemas, self.kind, self.message)


def _arrow_type(kind: DataType) -> pa.DataType:
    from pyspark.sql.pandas.types import to_arrow_type

    return to_arrow_type(kind, timezone="UTC")


def _arrow_udf(function: Callable[[pa.Array], pa.Array], kind: DataType) -> Any:
    from pyspark.sql import functions

    def batch(values: pa.Array) -> pa.Array:  # the hints make it a scalar Arrow UDF
        return function(values)

    # By name: pyspark's stubs do not list the Arrow UDFs (4.1+) yet.
    return functions.arrow_udf(batch, kind)  # type: ignore[attr-defined]


# -- writing ----------------------------------------------------------------------------------


def schema_for(schema_type: str, kind: DataType, name: str = "Value") -> str:
    """A schema (text, as registered) for Spark values of type ``kind``: an Avro record named
    ``name``, a draft-07 JSON Schema titled ``name``, or a proto3 message ``name``."""
    if schema_type == AVRO:
        return json.dumps(avro_columns.avro_schema_for(kind, name))
    if schema_type == JSON:
        return json.dumps(json_schema_columns.schema_for(kind, name))
    if schema_type == PROTOBUF:
        if not isinstance(kind, StructType):
            raise SchemaError("a Protobuf value is a message: encode a struct column")
        return protobuf_columns.proto_for(kind, name)
    raise SchemaError(f"schema type {schema_type}: AVRO, JSON or PROTOBUF")


def writer_schema(
    registry_url: RegistryLike,
    subject: str | None,
    schema_type: str,
    schema: str | None = None,
    schema_id: int | None = None,
    auto_register: bool = True,
) -> RegisteredSchema:
    """The schema values are written with (the module's docstring says how it is settled)."""
    client = RegistryClient.of(registry_url)
    if schema_id is None and subject is None:
        raise SchemaError("give a subject or a schema id")
    if schema_id is None and schema is not None and auto_register:
        assert subject is not None
        schema_id = client.register(subject, schema_type, schema)
    elif schema_id is None and schema is not None:
        assert subject is not None
        schema_id = client.lookup(subject, schema_type, schema)
    found = client.by_id(schema_id) if schema_id is not None else client.latest(subject or "")
    if found.schema_type != schema_type:
        raise SchemaError(f"schema id {found.id} is {found.schema_type}, not {schema_type}")
    return found


def encode_column(
    column: Any,
    subject: str | None,
    registry_url: RegistryLike,
    schema_type: str,
    *,
    schema: str | None = None,
    schema_id: int | None = None,
    auto_register: bool = True,
    message: str | None = None,
) -> Any:
    """A column (a struct, or a scalar for Avro and JSON) encoded to BINARY wire-format bytes
    with the settled writer schema; null stays null (a tombstone when it is the value)."""
    from pyspark.sql import functions as F

    writer = writer_schema(registry_url, subject, schema_type, schema, schema_id, auto_register)
    spec = _WriteSpec(registry_url, writer, message)
    spec.encoder()  # fail on the driver for a schema that cannot encode (a missing message)
    target = F.col(column) if isinstance(column, str) else column
    return _arrow_udf(spec.encode_batch, BinaryType())(target)


def to_avro(
    column: Any, subject: str | None, registry_url: RegistryLike, **options: Any
) -> Any:
    """Spark's ``to_avro`` into the Confluent wire format (``encode_column`` for AVRO)."""
    return encode_column(column, subject, registry_url, AVRO, **options)


def to_json_schema(
    column: Any, subject: str | None, registry_url: RegistryLike, **options: Any
) -> Any:
    return encode_column(column, subject, registry_url, JSON, **options)


def to_protobuf(
    column: Any, subject: str | None, registry_url: RegistryLike, **options: Any
) -> Any:
    return encode_column(column, subject, registry_url, PROTOBUF, **options)


class _WriteSpec:
    def __init__(
        self, registry_url: RegistryLike, writer: RegisteredSchema, message: str | None
    ) -> None:
        self.registry = as_registry(registry_url)  # picklable, login and CA included
        self.writer = writer
        self.message = message
        self._encode: Encode | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_encode": None}

    def encode_batch(self, values: pa.Array) -> pa.Array:
        encode = self.encoder()
        rows = [_plain(v, values.type) for v in values.to_pylist()]
        return pa.array([encode(v) for v in rows], type=pa.binary())

    def encoder(self) -> Encode:
        if self._encode is None:
            self._encode = self._make()
        return self._encode

    def _make(self) -> Encode:
        prefix = wire_prefix(self.writer.id)
        if self.writer.schema_type == AVRO:
            return _avro_encoder(prefix, json.loads(self.writer.text))
        client = RegistryClient.of(self.registry)
        if self.writer.schema_type == JSON:
            return _json_encoder(prefix, client, self.writer)
        return _protobuf_encoder(prefix, client, self.writer, self.message)


def _avro_encoder(prefix: bytes, schema: Any) -> Encode:
    import fastavro

    parsed = fastavro.parse_schema(schema)

    def encode(value: Any) -> bytes | None:
        if value is None:
            return None
        out = io.BytesIO()
        out.write(prefix)
        try:
            fastavro.schemaless_writer(out, parsed, value)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise SchemaError(f"value does not fit the Avro schema: {exc}") from exc
        return out.getvalue()

    return encode


def _json_encoder(prefix: bytes, client: RegistryClient, writer: RegisteredSchema) -> Encode:
    import jsonschema  # type: ignore[import-untyped]
    import referencing
    import referencing.jsonschema

    resolver = json_schema_columns.Resolver.of(client, writer)
    resources = [
        (name, referencing.Resource.from_contents(doc, referencing.jsonschema.DRAFT7))
        for name, doc in resolver.documents.items()
    ]
    registry: Any = referencing.Registry().with_resources(resources)
    validator_class = jsonschema.validators.validator_for(resolver.root)
    validator = validator_class(resolver.root, registry=registry)

    def encode(value: Any) -> bytes | None:
        if value is None:
            return None
        document = json_schema_columns.jsonable(value)
        error = jsonschema.exceptions.best_match(validator.iter_errors(document))
        if error is not None:
            path = "/".join(str(p) for p in error.absolute_path) or "(root)"
            raise SchemaError(f"value does not match the JSON Schema at {path}: {error.message}")
        return prefix + json.dumps(document, separators=(",", ":")).encode()

    return encode


def _protobuf_encoder(
    prefix: bytes, client: RegistryClient, writer: RegisteredSchema, message: str | None
) -> Encode:
    from google.protobuf import message_factory

    schemas = protobuf_columns.Schemas(client)
    _, file = schemas.file(writer.id)
    indexes = protobuf_columns.message_indexes(file, message)
    cls = message_factory.GetMessageClass(schemas.message(writer.id, indexes))
    head = prefix + protobuf_columns.write_message_indexes(indexes)

    def encode(value: Any) -> bytes | None:
        if value is None:
            return None
        if not isinstance(value, dict):
            raise SchemaError("a Protobuf value is a message: encode a struct column")
        try:
            msg = protobuf_columns.fill(cls(), value)
        except (ValueError, TypeError, AttributeError) as exc:
            raise SchemaError(f"value does not fit {cls.DESCRIPTOR.full_name}: {exc}") from exc
        return head + bytes(msg.SerializeToString())

    return encode


def _plain(value: Any, kind: pa.DataType) -> Any:
    """A value from ``Array.to_pylist()`` with maps as dicts (Arrow gives key-value lists)."""
    if value is None:
        return None
    if pa.types.is_map(kind):
        return {k: _plain(v, kind.item_type) for k, v in value}
    if pa.types.is_struct(kind):
        return {f.name: _plain(value[f.name], f.type) for f in kind}
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return [_plain(v, kind.value_type) for v in value]
    return value
