"""Properties of request framing: headers, tagged fields, and agreement with the codec."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

import brokercore.handlers  # noqa: F401  (registers the handlers)
from brokercore.handlers.registry import REGISTRY
from brokercore.protocol.framing import (
    FramingError,
    encode_response,
    parse_header,
    read_uvarint,
    skip_tagged_fields,
)


def uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


client_ids = st.one_of(st.none(), st.text(max_size=40))


@given(api_key=st.integers(-(2**15), 2**15 - 1), version=st.integers(-(2**15), 2**15 - 1),
       correlation_id=st.integers(-(2**31), 2**31 - 1), client_id=client_ids,
       rest=st.binary(max_size=20))
def test_header_fields_round_trip(api_key: int, version: int, correlation_id: int,
                                  client_id: str | None, rest: bytes) -> None:
    encoded_id = b"" if client_id is None else client_id.encode()
    frame = struct.pack(">hhih", api_key, version, correlation_id,
                        -1 if client_id is None else len(encoded_id)) + encoded_id + rest
    header, pos = parse_header(memoryview(frame))
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        api_key, version, correlation_id, client_id)
    assert frame[pos:] == rest


@given(st.integers(0, 2**32 - 1))
def test_uvarints_round_trip(value: int) -> None:
    encoded = uvarint(value)
    assert read_uvarint(memoryview(encoded), 0) == (value, len(encoded))


@given(fields=st.lists(st.tuples(st.integers(0, 2**20), st.binary(max_size=30)), max_size=6),
       rest=st.binary(max_size=10))
def test_tagged_fields_are_skipped_exactly(fields: list[tuple[int, bytes]], rest: bytes) -> None:
    encoded = uvarint(len(fields)) + b"".join(
        uvarint(tag) + uvarint(len(data)) + data for tag, data in fields)
    assert skip_tagged_fields(memoryview(encoded + rest), 0) == len(encoded)


@given(st.binary(max_size=12))
def test_truncated_headers_are_framing_errors_never_crashes(frame: bytes) -> None:
    try:
        _header, pos = parse_header(memoryview(frame))
    except FramingError:
        return
    assert pos <= len(frame)


@given(correlation_id=st.integers(-(2**31), 2**31 - 1), body=st.binary(max_size=50),
       flexible=st.booleans())
def test_responses_are_sized_and_carry_the_correlation_id(correlation_id: int, body: bytes,
                                                          flexible: bool) -> None:
    frame = encode_response(correlation_id, body, flexible_header=flexible)
    size, got_id = struct.unpack_from(">ii", frame)
    assert size == len(frame) - 4
    assert got_id == correlation_id
    assert frame.endswith(body)


@pytest.mark.parametrize("key", sorted(REGISTRY))
def test_every_registered_version_parses_what_the_codec_encodes(key: int) -> None:
    """Our header parser agrees with the codec's header encoder, flexible or not."""
    api = REGISTRY[key]
    for version in range(max(api.min_version, 0), api.max_version + 1):
        request = api.request_class(version=version)
        request.with_header(correlation_id=1234, client_id="framing-test")
        frame = memoryview(bytes(request.encode(version=version, header=True)))
        header, pos = parse_header(frame)
        assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
            key, version, 1234, "framing-test")
        if api.flexible(version):
            pos = skip_tagged_fields(frame, pos)
        decoded = api.request_class.decode(frame[pos:], version=version)
        assert repr(decoded) == repr(request)
