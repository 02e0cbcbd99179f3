"""The consumer's look-ups, kafka-python's names and return types, as a mixin of
:class:`kafkasim.consumer.consumer.Consumer` (needs ``self._broker``, ``self.config``,
``self._subs`` and ``self._m``, the metric counters):

- metadata: ``topics()`` (a set of names, internal topics left out as kafka-python's
  ``exclude_internal_topics=True``), ``partitions_for_topic(topic)`` (a set of ints, or
  None for an unknown topic);
- offsets: ``beginning_offsets``, ``end_offsets``, ``offsets_for_times`` (values are
  :class:`~kafkasim.types.OffsetAndTimestamp` or None; under read_committed the end offset
  is the last stable offset and a look-up by time finds only offsets below it, as Kafka's
  ListOffsets with the consumer's isolation level), ``committed(tp, metadata=False)``
  (an int, or an :class:`~kafkasim.types.OffsetAndMetadata` with ``metadata=True``, or
  None), ``highwater(tp)`` (the high watermark the last fetch of ``tp`` saw, None before
  one);
- ``metrics()``: kafka-python's ``{group: {name: value}}`` shape with Kafka's names.

Every blocking call takes kafka-python's ``timeout_ms=None``: it is checked, and never
expires, since each is one in-process broker call per partition (a
:class:`~kafkasim.errors.KafkaTimeoutError` can only come from a remote broker). Nothing is
cached. Thread-safe as the broker; the consumer is used from one thread.
"""

from __future__ import annotations

from typing import Iterable, Optional, Union

from kafkasim.arguments import bad_arg, check_arg, check_topic_partition
from kafkasim.errors import IllegalStateError, UnknownTopicOrPartitionError
from kafkasim.types import OffsetAndMetadata, OffsetAndTimestamp, TopicPartition

__all__ = ["OffsetLookups", "topics_arg", "partitions_arg", "timeout_arg", "EARLIEST", "LATEST"]

EARLIEST = -2
LATEST = -1


class OffsetLookups:
    """Metadata, offsets and metrics look-ups (mixin; see the module docstring)."""

    def topics(self, timeout_ms: Optional[int] = None) -> set[str]:
        """Names of the topics the broker has (internal ones excluded)."""
        timeout_arg(timeout_ms)
        return set(self._broker.list_topics())

    def partitions_for_topic(self, topic: str, timeout_ms: Optional[int] = None) -> Optional[set[int]]:
        check_arg("topic", topic, "str")
        timeout_arg(timeout_ms)
        try:
            return set(range(self._broker.partition_count(topic)))
        except UnknownTopicOrPartitionError:
            return None

    def _list_offset(self, tp: TopicPartition, timestamp: int) -> tuple[int, int]:
        """ListOffsets with this consumer's isolation level, as Kafka's consumer sends it (end
        offsets, look-ups by time, resets to latest): read_committed is bounded by the LSO."""
        if self._fetcher.isolation_level == 1:
            return self._broker.list_offsets(tp.topic, tp.partition, timestamp, isolation_level=1)
        return self._broker.list_offsets(tp.topic, tp.partition, timestamp)

    def beginning_offsets(self, partitions, timeout_ms: Optional[int] = None) -> dict[TopicPartition, int]:
        timeout_arg(timeout_ms)
        return {tp: self._broker.list_offsets(tp.topic, tp.partition, EARLIEST)[0]
                for tp in partitions_arg(partitions)}

    def end_offsets(self, partitions, timeout_ms: Optional[int] = None) -> dict[TopicPartition, int]:
        """The offset a read would end at: the high watermark, or under read_committed the
        last stable offset (Kafka's ListOffsets LATEST with the consumer's isolation level)."""
        timeout_arg(timeout_ms)
        return {tp: self._list_offset(tp, LATEST)[0] for tp in partitions_arg(partitions)}

    def offsets_for_times(self, timestamps: dict, timeout_ms: Optional[int] = None) \
            -> dict[TopicPartition, Optional[OffsetAndTimestamp]]:
        """{TopicPartition: ts} → {TopicPartition: OffsetAndTimestamp or None}: the first
        record at or after ``ts``, None when every record is older (kafka-python's), or when
        it is not below the last stable offset yet under read_committed (Kafka's)."""
        check_arg("timestamps", timestamps, "mapping", what="a mapping of TopicPartition to timestamp")
        timeout_arg(timeout_ms)
        wanted = [(check_topic_partition(tp), check_arg(f"the timestamp for {tp}", ts, "int", min=0))
                  for tp, ts in timestamps.items()]
        out = {}
        for tp, ts in wanted:
            off, t = self._list_offset(tp, ts)
            out[tp] = None if off < 0 else OffsetAndTimestamp(off, t, -1)
        return out

    def committed(self, partition: TopicPartition, metadata: bool = False,
                  timeout_ms: Optional[int] = None) -> Union[None, int, OffsetAndMetadata]:
        """The group's committed offset of ``partition``: an int, or with ``metadata=True``
        the OffsetAndMetadata; None without a commit (or with a negative sentinel committed)."""
        tp = check_topic_partition(partition)
        timeout_arg(timeout_ms)
        if self.config["group_id"] is None:
            raise IllegalStateError("committed() needs a group_id")
        om = self._broker.offset_fetch(self.config["group_id"], [tp]).get(tp)
        if om is None or om.offset < 0:        # a negative sentinel reads as no commit (Kafka's)
            return None
        return OffsetAndMetadata(om.offset, om.metadata, om.leader_epoch) if metadata else om.offset

    def highwater(self, partition: TopicPartition) -> Optional[int]:
        """The high watermark of an assigned ``partition`` as its last fetch saw it (the offset
        the next record produced will get); None until this consumer fetched it."""
        tp = check_topic_partition(partition)
        return self._subs.state(tp).highwater     # IllegalStateError when not assigned

    def metrics(self, raw: bool = False) -> dict[str, dict[str, float]]:
        """Counters by kafka-python's groups and Kafka's names (``raw`` is accepted for
        kafka-python's signature; the values are always plain numbers)."""
        lags = [s.highwater - s.position for s in self._subs.assignment.values()
                if s.highwater is not None and s.position is not None]
        return {
            "consumer-fetch-manager-metrics": {
                "records-consumed-total": self._m["records-consumed-total"],
                "records-lag-max": max(lags) if lags else 0,
            },
            "consumer-coordinator-metrics": {
                "commit-total": self._m["commit-total"],
                "assigned-partitions": len(self._subs.assignment),
            },
        }


def timeout_arg(timeout_ms) -> Optional[int]:
    return check_arg("timeout_ms", timeout_ms, "number", min=0, none_ok=True)


def topics_arg(topics) -> list[str]:
    if isinstance(topics, (bytes, dict)) or not isinstance(topics, Iterable):
        raise bad_arg("topics", topics, "a topic name or an iterable of topic names")
    return [check_arg("topic", t, "str") for t in topics]


def partitions_arg(partitions) -> list[TopicPartition]:
    if isinstance(partitions, (str, bytes, dict)) or not isinstance(partitions, Iterable):
        raise bad_arg("partitions", partitions, "an iterable of TopicPartition")
    return [check_topic_partition(tp) for tp in partitions]
