"""Small value types shared by every layer: TopicPartition, OffsetAndMetadata, OffsetAndTimestamp, Record.

Invariants: all are immutable (NamedTuples) and compare/sort by field order, so
``sorted(tps)`` orders by topic then partition, as Kafka's assignors do.
Thread-safety: immutable, so safe to share.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Sequence

__all__ = ["TopicPartition", "OffsetAndMetadata", "OffsetAndTimestamp", "Record", "Header",
           "ConsumerGroupMetadata"]

Header = tuple  # (key: str, value: bytes | None)


class TopicPartition(NamedTuple):
    """A topic name and a partition number, e.g. ``TopicPartition("orders", 3)``."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class OffsetAndMetadata(NamedTuple):
    """A committed offset (the next offset to read) with free-form metadata."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


class OffsetAndTimestamp(NamedTuple):
    """``offsets_for_times()``'s answer for one partition (kafka-python's fields): the first
    offset whose timestamp is at or after the one asked for, and that record's timestamp."""

    offset: int
    timestamp: int
    leader_epoch: int = -1


class ConsumerGroupMetadata(NamedTuple):
    """A consumer's group membership (kafka-python's fields, KIP-447), as ``Consumer.group_metadata()``
    returns it for ``Producer.send_offsets_to_transaction()``; ``group_id`` None without a group."""

    group_id: Optional[str] = None
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: Optional[str] = None


class Record(NamedTuple):
    """One record as read back from a log (offset and timestamp assigned).

    ``headers`` is a tuple of ``(key: str, value: bytes | None)`` pairs.
    ``producer_id``/``producer_epoch``/``sequence`` come from the record's batch
    header (``sequence`` = base sequence + offset delta, or -1 when not idempotent).
    """

    offset: int
    timestamp: int
    key: Optional[bytes]
    value: Optional[bytes]
    headers: Sequence[Header] = ()
    producer_id: int = -1
    producer_epoch: int = -1
    sequence: int = -1


PRODUCER_HEADER = "kafkasim.producer"
"""Header key the producer stamps with its identity (client id, UTF-8) when ``stamp_headers`` is on."""

SEQUENCE_HEADER = "kafkasim.seq"
"""Header key carrying the producer's per-key send sequence (ASCII decimal, 0-based) when stamped.

The Spark ordering audit compares these only among records of the same producer and key.
"""

INPUT_HEADER = "kafkasim-input"
"""Header key a consume-transform-produce job (the ``exactly-once`` lab) puts on each output
record: the input record it came from, ASCII ``"<input partition>:<input offset>"``.

``kafkasim audit transactions --output-topic`` counts committed outputs per input by it.
"""

DELIVERY_COUNT_HEADER = "kafkasim-delivery-count"
"""Header key a share-group consumer (KIP-932) puts on each output record beside
:data:`INPUT_HEADER`: the delivery count of the input record it came from, ASCII decimal
(Java's ``ConsumerRecord.deliveryCount()``; 1 on the first delivery). Its presence marks the
output of a share group: the ordering audit attributes the output's input-order inversions
to concurrent delivery (``kafkasim audit ordering``, cause ``concurrent_delivery``).
"""

__all__ += ["PRODUCER_HEADER", "SEQUENCE_HEADER", "INPUT_HEADER", "DELIVERY_COUNT_HEADER"]
