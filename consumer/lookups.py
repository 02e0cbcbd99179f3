"""The consumer's offset look-ups (kafka-python's ``partitions_for_topic``,
``beginning_offsets``, ``end_offsets``, ``offsets_for_times``) and its argument helpers,
as a mixin of :class:`kafkasim.consumer.consumer.Consumer` (needs ``self._broker``).

Each call is one broker call per partition; nothing is cached. Thread-safe as the broker.
"""

from __future__ import annotations

from typing import Iterable, Optional

from kafkasim.arguments import bad_arg, check_arg, check_topic_partition
from kafkasim.errors import UnknownTopicOrPartitionError
from kafkasim.types import TopicPartition

__all__ = ["OffsetLookups", "topics_arg", "partitions_arg", "EARLIEST", "LATEST"]

EARLIEST = -2
LATEST = -1


class OffsetLookups:
    """Offsets of partitions by position or time (mixin)."""

    def partitions_for_topic(self, topic: str) -> Optional[set[int]]:
        check_arg("topic", topic, "str")
        try:
            return set(range(self._broker.partition_count(topic)))
        except UnknownTopicOrPartitionError:
            return None

    def beginning_offsets(self, partitions) -> dict[TopicPartition, int]:
        return {tp: self._broker.list_offsets(tp.topic, tp.partition, EARLIEST)[0]
                for tp in partitions_arg(partitions)}

    def end_offsets(self, partitions) -> dict[TopicPartition, int]:
        return {tp: self._broker.list_offsets(tp.topic, tp.partition, LATEST)[0]
                for tp in partitions_arg(partitions)}

    def offsets_for_times(self, timestamps: dict) -> dict:
        """{TopicPartition: ts} → {TopicPartition: (offset, timestamp) or None}, as kafka-python."""
        check_arg("timestamps", timestamps, "mapping", what="a mapping of TopicPartition to timestamp")
        wanted = [(check_topic_partition(tp), check_arg(f"the timestamp for {tp}", ts, "int", min=0))
                  for tp, ts in timestamps.items()]
        out = {}
        for tp, ts in wanted:
            off, t = self._broker.list_offsets(tp.topic, tp.partition, ts)
            out[tp] = None if off < 0 else (off, t)
        return out


def topics_arg(topics) -> list[str]:
    if isinstance(topics, (bytes, dict)) or not isinstance(topics, Iterable):
        raise bad_arg("topics", topics, "a topic name or an iterable of topic names")
    return [check_arg("topic", t, "str") for t in topics]


def partitions_arg(partitions) -> list[TopicPartition]:
    if isinstance(partitions, (str, bytes, dict)) or not isinstance(partitions, Iterable):
        raise bad_arg("partitions", partitions, "an iterable of TopicPartition")
    return [check_topic_partition(tp) for tp in partitions]
