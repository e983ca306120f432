"""Appends lag samples and cluster events to the internal history topics (laganalysis.records)
of the watched cluster, so a Spark job anywhere can read the history with a Kafka client.

The topics are created when missing (partitions and configs from records.TOPIC_SETTINGS,
replication factor up to 3). Producing is asynchronous: a cycle hands its records to
librdkafka and moves on; a failed delivery is counted and logged, never retried by hand
(librdkafka retries), and never holds up the read model.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaException, Producer

from clusterclient import ClusterClient, ClusterRequestError, ClusterUnavailable
from laganalysis import records

from . import clientlog

log = logging.getLogger(__name__)

class HistoryTopics:
    def __init__(self, client: ClusterClient,
                 client_config: Mapping[str, str] | None = None) -> None:
        self.client = client
        self.producer = Producer({
            **(client_config or {}),
            "bootstrap.servers": client.bootstrap_servers, "client.id": "millrace-collector",
            "linger.ms": 50, "compression.type": "lz4", "queue.buffering.max.messages": 1000000,
            "message.timeout.ms": 60000,
            # While a broker (or the whole cluster) is down librdkafka retries its connection
            # from 100 ms on and logs every refusal: back off further (history can wait; a
            # record has a minute), and log through clientlog, rate-limited.
            "reconnect.backoff.ms": 1000, "reconnect.backoff.max.ms": 30000,
            "logger": clientlog.librdkafka,
        })
        self.ready = False
        self.failed = 0

    def ensure_topics(self) -> None:
        existing = self.client.metadata().topics
        brokers = len(self.client.metadata().brokers)
        for name, (partitions, configs) in records.TOPIC_SETTINGS.items():
            if name in existing:
                continue
            try:
                self.client.create_topic(name, partitions, min(3, max(1, brokers)), configs)
                log.info("created history topic %s", name)
            except ClusterRequestError as exc:
                if exc.code_name != "TOPIC_ALREADY_EXISTS":
                    raise
        self.ready = True

    def append(self, samples: list[records.LagSample], events: list[records.ClusterEvent]
               ) -> None:
        try:
            if not self.ready:
                self.ensure_topics()
        except (ClusterUnavailable, ClusterRequestError) as exc:
            log.warning("history topics not ready (%s); this cycle's history is skipped", exc)
            return
        for sample in samples:
            self._produce(records.LAG_SAMPLES_TOPIC, *records.encode_lag_sample(sample))
        for event in events:
            self._produce(records.CLUSTER_EVENTS_TOPIC, *records.encode_cluster_event(event))

    def poll(self) -> None:
        """Serves delivery reports and librdkafka's log lines (the collector polls every
        cycle, even one that found the cluster unreachable)."""
        self.producer.poll(0)

    def _produce(self, topic: str, key: bytes, value: bytes) -> None:
        try:
            self.producer.produce(topic, value, key, on_delivery=self._delivered)
        except BufferError:
            self.producer.poll(1.0)  # the local queue is full: let librdkafka drain it once
            self.failed += 1
        except KafkaException as exc:
            self.failed += 1
            log.warning("history record not queued: %s", exc)

    def _delivered(self, error: Any, message: Any) -> None:
        if error is not None:
            self.failed += 1
            if self.failed % 1000 == 1:
                log.warning("history record to %s not delivered: %s", message.topic(), error)

    def close(self, timeout: float = 5.0) -> None:
        self.producer.flush(timeout)
