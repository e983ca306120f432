"""Our compatibility verdicts against Apache Avro's reference checker, pair by pair."""

from __future__ import annotations

import json
from typing import Any

import avro.schema
import pytest
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType
from hypothesis import HealthCheck, given, settings

from registry import avro as registry_avro
from registry.compatibility import reader_incompatibilities

from .schema_pairs import schema_pairs

# Every pair on which the generator ever found the two checkers disagreeing where the
# reference checker was right, as (reader, writer). They stay here as regression cases.
REGRESSIONS: list[tuple[Any, Any]] = [
    # Seeded by hand: the branches of the checker the generator reaches least often.
    ({"type": "record", "name": "L", "fields": [
        {"name": "next", "type": ["null", "L"], "default": None},
        {"name": "v", "type": "long"}]},
     {"type": "record", "name": "L", "fields": [
        {"name": "next", "type": ["null", "L"]}, {"name": "v", "type": "int"}]}),
    (["null", "string"], {"type": "enum", "name": "E", "symbols": ["A"]}),
    ({"type": "enum", "name": "E", "symbols": ["A"], "default": "A"},
     {"type": "enum", "name": "E", "symbols": ["A", "B"]}),
]  # fmt: skip

# Disagreements where the specification, which we follow, and the reference checker differ:
# (reader, writer, our verdict). The generator is constrained away from them.
DEVIATIONS: list[tuple[Any, Any, bool]] = [
    # Found by the generator: an alias without a dot is relative to the namespace of its
    # type ("ns.other.N1" here), so it does not name the writer's "N1".
    ({"type": "record", "name": "N0", "namespace": "ns.other", "fields": [
        {"name": "f1", "type": {"type": "record", "name": "MN1", "aliases": ["N1"],
                                "fields": []}}]},
     {"type": "record", "name": "N0", "fields": [
        {"name": "f1", "type": {"type": "record", "name": "N1", "fields": []}}]},
     False),
    # Decimals resolve only with equal precision and scale; the reference ignores them.
    ({"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2},
     {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 3},
     False),
]  # fmt: skip


def oracle_compatible(reader: Any, writer: Any) -> bool:
    checker = ReaderWriterCompatibilityChecker()  # type: ignore[no-untyped-call]
    result = checker.get_compatibility(
        avro.schema.parse(json.dumps(reader)), avro.schema.parse(json.dumps(writer))
    )
    return bool(result.compatibility is SchemaCompatibilityType.compatible)


def our_compatible(reader: Any, writer: Any) -> bool:
    parsed_reader = registry_avro.parse(json.dumps(reader))
    parsed_writer = registry_avro.parse(json.dumps(writer))
    return not reader_incompatibilities(parsed_reader, parsed_writer)


def assert_agree(reader: Any, writer: Any) -> None:
    assert our_compatible(reader, writer) == oracle_compatible(reader, writer), (reader, writer)


@pytest.mark.parametrize(("reader", "writer"), REGRESSIONS)
def test_it_agrees_on_every_pair_that_once_disagreed(reader: Any, writer: Any) -> None:
    assert_agree(reader, writer)


@pytest.mark.parametrize(("reader", "writer", "verdict"), DEVIATIONS)
def test_it_follows_the_specification_where_the_reference_checker_does_not(
    reader: Any, writer: Any, verdict: bool
) -> None:
    assert our_compatible(reader, writer) is verdict
    assert oracle_compatible(reader, writer) is not verdict


@settings(
    max_examples=1500,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=False,
)
@given(schema_pairs())
def test_it_agrees_with_the_avro_reference_checker(pair: tuple[Any, Any]) -> None:
    a, b = pair
    assert_agree(a, b)
    assert_agree(b, a)
