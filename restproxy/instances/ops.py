"""What REST requests do to a consumer; each function runs on the instance's owner thread."""

from __future__ import annotations

from typing import Any

from confluent_kafka import OFFSET_END, KafkaException, TopicPartition

from restproxy import errors

from .instance import ConsumerInstance


def subscribe(topics: list[str] | None, pattern: str | None) -> Any:
    def run(instance: ConsumerInstance) -> None:
        if instance.manual:
            raise errors.illegal_state(
                "Subscription to topics, partitions and pattern are mutually exclusive."
            )
        target = [f"^{pattern.lstrip('^')}"] if pattern else list(topics or [])
        instance.kafka().subscribe(target)
        instance.subscribed_topics, instance.pattern = list(topics or []), pattern
        instance.drop_pending()
    return run


def unsubscribe(instance: ConsumerInstance) -> None:
    instance.kafka().unsubscribe()
    instance.subscribed_topics, instance.pattern = [], None
    instance.drop_pending()
    instance.returned.clear()


def subscription(instance: ConsumerInstance) -> list[str]:
    if instance.pattern is not None:
        return sorted({tp.topic for tp in instance.kafka().assignment()})
    return list(instance.subscribed_topics)


def assign(partitions: list[tuple[str, int]]) -> Any:
    def run(instance: ConsumerInstance) -> None:
        if instance.subscribed_topics or instance.pattern:
            raise errors.illegal_state(
                "Subscription to topics, partitions and pattern are mutually exclusive."
            )
        instance.kafka().assign([TopicPartition(t, p) for t, p in partitions])
        instance.manual = bool(partitions)
        instance.drop_pending()
        instance.returned.clear()
    return run


def assignment(instance: ConsumerInstance) -> list[tuple[str, int]]:
    return [(tp.topic, tp.partition) for tp in instance.kafka().assignment()]


def seek(positions: list[tuple[str, int, int]]) -> Any:
    """Move to offsets (or OFFSET_BEGINNING / OFFSET_END) of assigned partitions."""
    def run(instance: ConsumerInstance) -> None:
        consumer = instance.kafka()
        assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
        for topic, partition, _offset in positions:
            if (topic, partition) not in assigned:
                raise errors.illegal_state(
                    f"No current assignment for partition {topic}-{partition}"
                )
        instance.drop_pending({(t, p) for t, p, _ in positions})
        for topic, partition, offset in positions:
            _seek_one(instance, TopicPartition(topic, partition, offset))
    return run


def _seek_one(instance: ConsumerInstance, target: TopicPartition) -> None:
    consumer = instance.kafka()
    try:
        consumer.seek(target)
    except KafkaException:
        # A partition assigned a moment ago has no fetcher yet: assign at the offset.
        if not instance.manual:
            raise
        others = [tp for tp in consumer.assignment()
                  if (tp.topic, tp.partition) != (target.topic, target.partition)]
        consumer.assign([*others, target])


def seek_edge(partitions: list[tuple[str, int]], beginning: bool) -> Any:
    """Seek to the log start or end as it is now (librdkafka resolves logical offsets
    later, which would let records produced right after the request slip by)."""
    def run(instance: ConsumerInstance) -> None:
        targets = []
        for topic, partition in partitions:
            low, high = instance.kafka().get_watermark_offsets(
                TopicPartition(topic, partition), timeout=10
            )
            targets.append((topic, partition, low if beginning else high))
        seek(targets)(instance)
    return run


def seek_timestamps(stamps: list[tuple[str, int, int]]) -> Any:
    def run(instance: ConsumerInstance) -> None:
        found = instance.kafka().offsets_for_times(
            [TopicPartition(t, p, ts) for t, p, ts in stamps], timeout=10
        )
        targets = [(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_END)
                   for tp in found]
        seek(targets)(instance)
    return run


def commit(offsets: list[tuple[str, int, int]] | None) -> Any:
    """Commit the given offsets, or (None) every record handed to the client."""
    def run(instance: ConsumerInstance) -> list[TopicPartition]:
        if offsets is None:
            targets = instance.fetched_offsets()
        else:
            targets = [TopicPartition(t, p, o) for t, p, o in offsets]
        if not targets:
            return []
        result = instance.kafka().commit(offsets=targets, asynchronous=False)
        return list(result or [])
    return run


def committed(partitions: list[tuple[str, int]]) -> Any:
    def run(instance: ConsumerInstance) -> list[TopicPartition]:
        if not partitions:
            return []
        return list(instance.kafka().committed(
            [TopicPartition(t, p) for t, p in partitions], timeout=10
        ))
    return run
