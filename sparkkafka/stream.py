"""``spark.readStream.format("millrace-kafka")``: Spark 4's Python streaming reader over Kafka.

Spark drives the reader on the driver (one long-lived Python process per query) and keeps the
offsets in the query's checkpoint: ``initialOffset`` resolves ``startingOffsets`` (or a
timestamp) to concrete offsets once, for a new query only; each trigger ``latestOffset`` lists
the matching partitions again (so a topic created under ``subscribePattern`` joins, from its
earliest offset) and cuts the range by the read limit (``maxOffsetsPerTrigger``);
``partitions`` turns [start, end) into the same slices a batch read uses, checking the log
start offsets for data loss; executors read the slices exactly as a batch read does.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from sparkkafka.offsets import TP, Offsets, admit, from_json, to_json
from sparkkafka.options import OffsetRange, OptionError, SourceOptions, plan_slices
from sparkkafka.source import (
    KafkaReader,
    KafkaSlice,
    admin_client,
    list_offsets,
    matching_partitions,
    starting_offsets,
)

log = logging.getLogger(__name__)


class DataLossError(OptionError):
    """Offsets a query still had to read are gone (deleted records, a deleted topic)."""


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions, decoders: Mapping[str, Any] | None = None) -> None:
        self.options = options
        self.decoders = dict(decoders or {})
        self._admin: Any = None
        self._target: Offsets | None = None  # Trigger.AvailableNow's end, fixed at its start

    def __getstate__(self) -> dict[str, Any]:
        # Executors get the reader pickled; the driver's admin client stays behind.
        return {**self.__dict__, "_admin": None}

    @property
    def admin(self) -> Any:
        if self._admin is None:
            self._admin = admin_client(self.options)
        return self._admin

    def initialOffset(self) -> dict[str, Any]:
        return to_json(starting_offsets(self.options, self.admin))

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadMaxRows(limit) if limit else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = from_json(start)
        latest = self._target if self._target is not None else self._latest()
        new = [tp for tp in latest if tp not in begin]
        if new:  # a partition or topic that appeared since: read it from its earliest offset
            begin.update(list_offsets(self.options, self.admin, dict.fromkeys(new, "earliest")))
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end = admit(begin, latest, max_rows)
        # Keep partitions that vanished from the metadata where they were: partitions() says
        # whether that is data loss.
        end.update({tp: o for tp, o in from_json(start).items() if tp not in end})
        return to_json(end)

    def reportLatestOffset(self) -> dict[str, Any]:
        return to_json(self._latest())

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[KafkaSlice]:
        ranges = self._ranges(from_json(start), from_json(end))
        slices = plan_slices(
            ranges, self.options.max_records_per_partition, self.options.min_partitions
        )
        return [KafkaSlice(s.topic, s.partition, s.start, s.end) for s in slices]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch | tuple[Any, ...]]:
        return KafkaReader(self.options, self.decoders).read(partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: Spark's checkpoint holds the offsets, the cluster holds no state."""

    def stop(self) -> None:
        self._admin = None

    def _latest(self) -> Offsets:
        tps = matching_partitions(self.options, self.admin)
        return list_offsets(self.options, self.admin, dict.fromkeys(tps, "latest"))

    def _ranges(self, start: Offsets, end: Offsets) -> list[OffsetRange]:
        tps = sorted(end)
        earliest = list_offsets(self.options, self.admin, dict.fromkeys(tps, "earliest"), True)
        latest = list_offsets(self.options, self.admin, dict.fromkeys(tps, "latest"), True)
        ranges = []
        for tp in tps:
            begin = start.get(tp, earliest.get(tp, 0))
            stop = end[tp]
            if tp not in latest:
                self._lost(tp, f"the partition is gone (offsets {begin} to {stop} unread)")
                continue
            if begin < earliest[tp]:
                self._lost(
                    tp, f"offsets {begin} to {earliest[tp] - 1} were deleted before they were read"
                )
                begin = min(earliest[tp], stop)
            if stop > latest[tp]:
                self._lost(tp, f"the log ends at {latest[tp]}, before {stop} (topic recreated?)")
                stop = latest[tp]
            if begin < stop:
                ranges.append(OffsetRange(tp[0], tp[1], begin, stop))
        return ranges

    def _lost(self, tp: TP, what: str) -> None:
        message = (
            f"{tp[0]}-{tp[1]}: {what}. Some data may have been lost; set failOnDataLoss=false "
            "to go on from what is left"
        )
        if self.options.fail_on_data_loss:
            raise DataLossError(message)
        log.warning("%s", message)
