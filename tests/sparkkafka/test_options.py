"""The Data Source's option parsing and slicing, without Spark or a cluster."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkkafka.options import (
    DEFAULT_MAX_RECORDS_PER_PARTITION,
    OffsetRange,
    OptionError,
    parse_options,
    parse_stream_options,
    plan_slices,
)

BASE = {"kafka.bootstrap.servers": "127.0.0.1:1"}


def test_options_are_spark_s_names_in_any_case() -> None:
    opts = parse_options(
        {
            **BASE,
            "SUBSCRIBE": "a, b",
            "startingoffsets": '{"a": {"0": -2}, "b": {"0": 5}}',
            "endingOffsets": "latest",
            "kafka.security.protocol": "PLAINTEXT",
            "includeHeaders": "TRUE",
        }
    )
    assert opts.subscribe == ("a", "b") and opts.include_headers
    assert opts.starting == {"a": {0: -2}, "b": {0: 5}} and opts.ending == "latest"
    assert opts.client == {"bootstrap.servers": "127.0.0.1:1", "security.protocol": "PLAINTEXT"}
    assert opts.max_records_per_partition == DEFAULT_MAX_RECORDS_PER_PARTITION


def test_subscribe_pattern_matches_whole_names() -> None:
    opts = parse_options({**BASE, "subscribePattern": "orders-.*"})
    assert opts.topic_matches("orders-eu") and not opts.topic_matches("old-orders-eu")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"assign": '{"a": [0, "x"]}'}, "assign must be JSON"),
        ({"subscribePattern": "("}, "not a regular expression"),
        ({"subscribe": "a", "endingOffsets": '{"a": {"0": -2}}'}, "cannot use -2"),
        ({"subscribe": "a", "startingOffsets": '{"a": {"0": true}}'}, "startingOffsets must be"),
        ({"subscribe": "a", "startingTimestamp": "soon"}, "startingTimestamp must be a whole"),
        ({"subscribe": "a", "failOnDataLoss": "maybe"}, "failOnDataLoss must be true or false"),
        ({"subscribe": "a", "valueFormat": "avro"}, "schema.registry.url"),
        ({"subscribe": "a", "valueFormat": "thrift"}, "binary, avro, jsonschema or protobuf"),
        ({"subscribe": "a", "valueFormat": "protobuf"}, "schema.registry.url"),
        ({"subscribe": "a", "mode": "DROPMALFORMED"}, "FAILFAST or PERMISSIVE"),
        ({"subscribe": "a", "kafka.enable.auto.commit": "true"}, "set by the source"),
        ({"subscribe": "a", "schema.registry.basic.auth.user": "u:p"},
         "schema.registry.basic.auth.user is not one of"),
        ({"subscribe": "a", "endingOffsetsAtRead": "yes"}, "endingOffsetsAtRead must be true"),
        ({"subscribe": "a", "endingOffsetsAtRead": "true", "endingOffsets": '{"a": {"0": 5}}'},
         "endingOffsetsAtRead needs endingOffsets latest"),
        ({"subscribe": "a", "endingOffsetsAtRead": "true", "endingTimestamp": "5"},
         "endingOffsetsAtRead needs endingOffsets latest"),
    ],
)
def test_bad_options_name_themselves(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=re.escape(message)):
        parse_options({**BASE, **options})


def test_schema_registry_options_are_confluent_s_client_keys() -> None:
    opts = parse_options({**BASE, "subscribe": "a", "valueFormat": "avro",
                          "schema.registry.url": "https://r:8081",
                          "schema.registry.basic.auth.user.info": "u:p",
                          "Schema.Registry.SSL.CA.Location": "/ca.crt"})
    assert opts.schema_registry == {"url": "https://r:8081", "basic.auth.user.info": "u:p",
                                    "ssl.ca.location": "/ca.crt"}
    assert opts.schema_registry_url == "https://r:8081"


def test_spark_group_options_are_taken_and_kept_out_of_the_client_settings() -> None:
    """A job written for Spark's connector may set kafka.group.id or groupIdPrefix."""
    given = parse_options(
        {**BASE, "subscribe": "a", "kafka.group.id": "mine", "groupIdPrefix": "etl"}
    )
    assert (given.group_id, given.group_id_prefix) == ("mine", "etl")
    assert "group.id" not in given.client
    assert parse_options({**BASE, "subscribe": "a"}).group_id_prefix == "spark-kafka-relation"
    assert parse_stream_options({**BASE, "subscribe": "a"}).group_id_prefix == "spark-kafka-source"
    assert parse_stream_options(
        {**BASE, "subscribe": "a", "groupIdPrefix": "mine"}).group_id_prefix == "mine"


def test_bootstrap_servers_are_required() -> None:
    with pytest.raises(OptionError, match=r"kafka\.bootstrap\.servers is required"):
        parse_options({"subscribe": "a"})


def test_ranges_are_cut_to_max_records_and_empty_ones_dropped() -> None:
    ranges = [OffsetRange("t", 0, 10, 35), OffsetRange("t", 1, 5, 5)]
    assert plan_slices(ranges, 10) == [
        OffsetRange("t", 0, 10, 20),
        OffsetRange("t", 0, 20, 30),
        OffsetRange("t", 0, 30, 35),
    ]


def test_min_partitions_cuts_further() -> None:
    slices = plan_slices([OffsetRange("t", 0, 0, 100)], 1000, min_partitions=4)
    assert [(s.start, s.end) for s in slices] == [(0, 25), (25, 50), (50, 75), (75, 100)]


@given(
    st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 1000)), max_size=8),
    st.integers(1, 300),
    st.none() | st.integers(1, 50),
)
def test_slices_cover_every_offset_exactly_once(
    bounds: list[tuple[int, int]], max_records: int, min_partitions: int | None
) -> None:
    ranges = [OffsetRange("t", p, lo, lo + n) for p, (lo, n) in enumerate(bounds)]
    slices = plan_slices(ranges, max_records, min_partitions)
    assert all(0 < s.size <= max_records for s in slices)
    covered = sorted((s.partition, o) for s in slices for o in range(s.start, s.end))
    assert covered == sorted((r.partition, o) for r in ranges for o in range(r.start, r.end))
