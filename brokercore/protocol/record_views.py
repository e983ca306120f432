"""Produce requests decoded with their record sets as views of the request's frame.

kafka-python's codec decodes a `records` field as `bytes(data[pos:pos + n])`: a copy of
every produced byte, which the log then copied again into a `bytearray` to stamp offsets
and leader epochs into. The Kafka listener reads each request into a buffer of its own
(`brokercore/frame_connection.py`) that nothing reads once the request is answered, so for
ProduceRequest the field decodes to the slice `data[pos:pos + n]` instead, and the log
validates and stamps the batches where they arrived (`PartitionLog.append_as_leader`).

Only ProduceRequest, which only the broker decodes: a record set that is kept (a fetch
response's in the replica fetcher, the coordinators' loads) stays `bytes`, since a view
would keep its whole frame alive. `tests/brokercore/protocol/test_record_views.py` checks
that the codec still compiles the field this way, should kafka-python change.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kafka.protocol.schemas.fields.codecs.types import Bytes, UnsignedVarInt32
from kafka.protocol.schemas.fields.simple import SimpleField


class RecordsView(Bytes):  # type: ignore[misc]
    """The `records` type, decoded as a slice of the frame rather than a copy of it."""

    @classmethod
    def emit_decode_from(cls, ctx: Any, var_name: str, indent: str,
                         compact: bool = False) -> None:
        length = ctx.next_var("ln")
        if compact:
            UnsignedVarInt32.emit_decode_from(ctx, length, indent)
            ctx.emit(indent, f"{length} -= 1")
        else:
            ctx.emit(indent, f'{length} = unpack_from(">i", data, pos)[0]')
            ctx.emit(indent, "pos += 4")
        ctx.emit(indent, f"if {length} < 0:")
        ctx.emit(indent, f"    {var_name} = None")
        ctx.emit(indent, "else:")
        ctx.emit(indent, f"    {var_name} = data[pos:pos + {length}]")
        ctx.emit(indent, f"    pos += {length}")


def decode_records_as_views(message_class: Any) -> None:
    """Make `message_class.decode` return its `records` fields as views of the input."""
    struct = message_class._struct
    for field in _fields(struct):
        if isinstance(field, SimpleField) and field._type_str == "records":
            field._type = RecordsView
    # Drop decoders compiled before (the codec caches one per version on first use).
    struct._compiled_encoders = {key: value for key, value in struct._compiled_encoders.items()
                                 if key[0] != "decode"}


def _fields(struct: Any) -> Iterator[Any]:
    """Every field under `struct`, those of the structs inside arrays (`array_of`, which
    the compiled decoder reads) included."""
    for field in getattr(struct, "_fields", None) or []:
        yield field
        yield from _fields(field)
        if getattr(field, "array_of", None) is not None:
            yield from _fields(field.array_of)
