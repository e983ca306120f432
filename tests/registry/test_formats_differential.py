"""JSON Schema and Protobuf verdicts on generated pairs, against the rule that made each pair.

Every pair (`format_pairs.py`) is a base schema and one named evolution whose verdict in
each direction the published rules give. Each is checked through the format interface
(parse, canonical text, compatibility) and under all seven levels; the incompatible ones
must also say where (`verbose` names the path). The pairs are deterministic by seed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from registry import formats
from registry.compatibility import Level, check_level
from registry.formats import ParsedSchema, SchemaFormat

from .format_pairs import JSON_EVOLUTIONS, Pair, json_pair
from .proto_pairs import PROTO_EVOLUTIONS, proto_pair

JSON_PAIRS = 33 * 12  # each evolution 12 times
PROTO_PAIRS = 19 * 12


def expected(level: Level, pair: Pair) -> bool:
    return (not level.backward or pair.backward) and (not level.forward or pair.forward)


def check(schema_format: SchemaFormat, pair: Pair, old: ParsedSchema, new: ParsedSchema
          ) -> None:
    backward = not schema_format.reader_incompatibilities(new, old)
    forward = not schema_format.reader_incompatibilities(old, new)
    assert (backward, forward) == (pair.backward, pair.forward), (pair.rule, pair.old, pair.new)
    for level in Level:
        messages = check_level(level, new, [(1, old)], schema_format.reader_incompatibilities)
        assert (not messages) is expected(level, pair), (level, pair.rule)
        if messages:
            assert messages[0].startswith("{errorType:'") and "path '#" in messages[0]


def test_the_generators_cover_every_evolution() -> None:
    assert len(JSON_EVOLUTIONS) == 33 and len(PROTO_EVOLUTIONS) == 19
    assert {json_pair(seed).rule for seed in range(JSON_PAIRS)} == {
        rule for rule, *_ in JSON_EVOLUTIONS}


@pytest.mark.parametrize("block", range(8))
def test_json_schema_pairs_get_the_verdict_of_their_rule(block: int) -> None:
    schema_format = formats.get("JSON")
    for seed in range(block, JSON_PAIRS, 8):
        pair = json_pair(seed)
        old = schema_format.parse(json.dumps(pair.old), [], False)
        new = schema_format.parse(json.dumps(pair.new), [], False)
        check(schema_format, pair, old, new)
        # The canonical text parses to itself: a stored schema reads back unchanged.
        assert schema_format.parse(new.text, [], False).text == new.text


@pytest.mark.parametrize("block", range(6))
def test_protobuf_pairs_get_the_verdict_of_their_rule(block: int) -> None:
    schema_format = formats.get("PROTOBUF")
    for seed in range(block, PROTO_PAIRS, 6):
        pair = proto_pair(seed)
        old = schema_format.parse(pair.old, [], False)
        new = schema_format.parse(pair.new, [], False)
        check(schema_format, pair, old, new)
        again = schema_format.parse(new.text, [], False)
        assert again.text == new.text
        assert again.parsed == new.parsed  # compiled once from text: as from the canonical
        serialized = schema_format.formatted(new, "serialized")
        assert serialized is not None
        assert schema_format.parse(serialized, [], False).text == new.text


def _normalized(schema_format: SchemaFormat, text: str) -> Any:
    return schema_format.parse(text, [], True).text


def test_normalize_gives_one_text_for_reordered_protobuf_fields() -> None:
    schema_format = formats.get("PROTOBUF")
    one = 'syntax = "proto3";\nimport "google/protobuf/empty.proto";\n' \
          'import "google/protobuf/any.proto";\nmessage M { int32 b = 2; string a = 1; }\n'
    two = 'syntax = "proto3";\nimport "google/protobuf/any.proto";\n' \
          'import "google/protobuf/empty.proto";\nmessage M { string a = 1; int32 b = 2; }\n'
    assert _normalized(schema_format, one) == _normalized(schema_format, two)
    assert schema_format.parse(one, [], False).text != schema_format.parse(two, [], False).text
