"""The read model of a lag-anomaly query's alerts: its task reads the output topic
(read_committed: only what the exactly-once sink committed) into `LagAlert` rows, which the
group page shows and which are pushed to the group's open pages as they arrive.

Where to resume is in the table itself: the newest stored offset per partition of the topic,
plus one. A record read twice (a task replaced mid-poll) hits the table's unique constraint
and is stored once.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.db.models import Max

from controlcenter.streams.models import LagAlert, StreamQuery
from laganalysis.records import RecordError, decode_lag_alert

log = logging.getLogger(__name__)

MAX_RECORDS = 500  # a poll's most records: the task gets back to its heartbeat


class AlertFeed:
    def __init__(self, query: StreamQuery, client_config: dict[str, str]) -> None:
        from confluent_kafka import Consumer

        self.query = query
        self.topic = query.output_topic
        self.consumer = Consumer({
            **client_config, "bootstrap.servers": settings.KAFKA_BOOTSTRAP_SERVERS,
            "group.id": f"millrace-lag-alerts-{query.pk}", "enable.auto.commit": False,
            "isolation.level": "read_committed", "auto.offset.reset": "earliest",
            "client.id": "millrace-lag-alerts"})
        self.assigned = False

    def _assign(self) -> bool:
        from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

        try:
            metadata = self.consumer.list_topics(self.topic, timeout=5)
        except KafkaException as exc:
            log.warning("lag alerts topic %s: %s", self.topic, exc)
            return False
        topic = metadata.topics.get(self.topic)
        if topic is None or topic.error is not None or not topic.partitions:
            return False
        stored = dict(LagAlert.objects.filter(source_topic=self.topic)
                      .values("source_partition").annotate(last=Max("source_offset"))
                      .values_list("source_partition", "last"))
        self.consumer.assign([
            TopicPartition(self.topic, p, stored[p] + 1 if p in stored else OFFSET_BEGINNING)
            for p in sorted(topic.partitions)])
        return True

    def poll(self) -> int:
        """Store what arrived since the last poll (without waiting); the rows stored."""
        if not self.assigned:
            self.assigned = self._assign()
            if not self.assigned:
                return 0
        from confluent_kafka import KafkaException

        try:
            messages = self.consumer.consume(MAX_RECORDS, timeout=0)
        except KafkaException as exc:  # librdkafka retries; the next poll tries again
            log.warning("reading lag alerts from %s: %s", self.topic, exc)
            return 0
        records: list[tuple[Any, int, int]] = []
        for message in messages:
            if message.error() is not None or message.value() is None:
                continue
            try:
                records.append((decode_lag_alert(message.value()), message.partition(),
                                message.offset()))
            except RecordError as exc:
                log.warning("skipping %s[%s]@%s: %s", self.topic, message.partition(),
                            message.offset(), exc)
        if not records:
            return 0
        from controlcenter.streams import actions

        return actions.record_lag_alerts(self.query, self.topic, records)

    def close(self) -> None:
        self.consumer.close()
