"""Java collection orders that Kafka's sticky assignors depend on, reproduced exactly.

Kafka's ``AbstractStickyAssignor`` walks ``HashMap``/``HashSet`` instances, so where
two choices tie its result depends on Java's hash iteration order.  To give the same
output as Kafka for the same input, kafkasim reproduces that order here:

- ``String.hashCode``: ``h = 31*h + c`` over UTF-16 code units, as a signed 32-bit int;
- ``TopicPartition.hashCode``: ``31 * (31 + partition) + topic.hashCode()`` (32-bit);
- ``Uuid.hashCode`` (Kafka's topic ids): ``xor = msb ^ lsb; (int)(xor >> 32) ^ (int) xor``;
  ``Uuid.compareTo``: the most, then the least significant 64 bits, each as a *signed* long;
- ``String.compareTo``: UTF-16 code units, not code points;
- ``HashMap`` iteration: buckets in index order, index = ``(h ^ (h >>> 16)) & (cap-1)``,
  entries of one bucket in insertion order; ``cap`` starts at 16 and doubles when the
  size exceeds 3/4 of it (a resize keeps the relative order within a bucket).

Not reproduced: the order inside a "treeified" bucket (8+ colliding keys in a table
of 64+), which needs pathological member ids.

Pure functions and a small single-threaded helper class; not thread-safe to share a
:class:`JavaHashSet` between threads (the assignors create their own per call).
"""

from __future__ import annotations

import base64
import uuid
from typing import Hashable, Iterable, Optional

__all__ = [
    "string_hash", "topic_partition_hash", "hashmap_capacity", "hashmap_order", "JavaHashSet",
    "uuid_hash", "uuid_sort_key", "string_sort_key", "uuid_hashset_order", "uuid_from_kafka_string",
    "int_hashset_order",
]

_MASK = 0xFFFFFFFF


def string_hash(s: str) -> int:
    """Java's ``String.hashCode`` as an unsigned 32-bit value."""
    h = 0
    if s.isascii():
        for ch in s.encode("ascii"):
            h = (31 * h + ch) & _MASK
        return h
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & _MASK
    return h


def topic_partition_hash(topic: str, partition: int) -> int:
    """Kafka's ``TopicPartition.hashCode`` as an unsigned 32-bit value."""
    return (31 * ((31 + partition) & _MASK) + string_hash(topic)) & _MASK


def uuid_hash(u: uuid.UUID) -> int:
    """Kafka's ``Uuid.hashCode`` as an unsigned 32-bit value."""
    x = (u.int >> 64) ^ (u.int & 0xFFFFFFFFFFFFFFFF)
    return ((x >> 32) ^ x) & _MASK


def _signed64(v: int) -> int:
    return v - (1 << 64) if v >> 63 else v


def uuid_from_kafka_string(text: str) -> uuid.UUID:
    """Kafka's ``Uuid.fromString``: 22 characters of URL-safe base64 (no padding) -> 16 bytes.

    A string that does not decode to 16 bytes raises ValueError naming it.
    """
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"Invalid Kafka topic id {text!r}: not URL-safe base64") from exc
    if len(text) != 22 or len(raw) != 16:
        raise ValueError(f"Invalid Kafka topic id {text!r}: expected 22 base64 characters (16 bytes)")
    return uuid.UUID(bytes=raw)


def uuid_sort_key(u: uuid.UUID) -> tuple[int, int]:
    """A key that sorts ids as Kafka's ``Uuid.compareTo`` (signed most, then least significant bits)."""
    return _signed64(u.int >> 64), _signed64(u.int & 0xFFFFFFFFFFFFFFFF)


def string_sort_key(s: str) -> bytes:
    """A key that sorts strings as Java's ``String.compareTo`` (UTF-16 code units)."""
    return s.encode("utf-16-be", "surrogatepass")


def uuid_hashset_order(ids: Iterable[uuid.UUID]) -> list[uuid.UUID]:
    """The iteration order of ``new HashSet<>(ids)`` over Kafka ``Uuid``s.

    Capacity as the copy constructor sizes it (``max(n / .75 + 1, 16)`` rounded up to a power
    of two); ids in one bucket follow ``Uuid.compareTo`` (Java keeps the insertion order of its
    source, which for a set is itself unspecified).
    """
    ids = list(dict.fromkeys(ids))
    mask = _copy_capacity(len(ids)) - 1
    return sorted(ids, key=lambda u: (_spread(uuid_hash(u)) & mask, uuid_sort_key(u)))


def _copy_capacity(n: int) -> int:
    # HashSet(Collection) on Java 17: new HashMap<>(max((int) (n / .75f) + 1, 16)), a power of two.
    cap = 16
    while cap < int(n / 0.75) + 1:
        cap *= 2
    return cap


def int_hashset_order(values: Iterable[int]) -> list[int]:
    """The iteration order of a Java ``HashSet<Integer>`` copied from ``values`` in ascending order.

    ``Integer.hashCode`` is the value, so the bucket is ``(v ^ (v >>> 16)) & (cap - 1)``: the
    order is ascending while every value is below the capacity, and e.g. ``{0, 1, 16}`` (cap 16)
    iterates 0, 16, 1. Capacity as the copy constructor sizes it on Java 17 (Kafka's
    ``Assignment`` records and the assignors' deep copies are copies); values in one bucket in
    ascending order (the insertion order of a copy from a sorted list).
    """
    ordered = sorted(set(values))
    mask = _copy_capacity(len(ordered)) - 1
    return sorted(ordered, key=lambda v: (_spread(v & _MASK) & mask, v))


def _spread(h: int) -> int:
    return (h ^ (h >> 16)) & _MASK


def hashmap_capacity(size: int) -> int:
    """Table size of a default ``new HashMap<>()`` after ``size`` puts."""
    cap = 16
    while size > cap * 3 // 4:
        cap *= 2
    return cap


def hashmap_order(keys: Iterable[str], capacity: Optional[int] = None) -> list[str]:
    """The iteration order of a default Java ``HashMap<String, ?>`` filled with ``keys`` in order."""
    keys = list(keys)
    cap = capacity or hashmap_capacity(len(keys))
    mask = cap - 1
    return [k for _, _, k in sorted((_spread(string_hash(k)) & mask, i, k) for i, k in enumerate(keys))]


class JavaHashSet:
    """Tracks which element a Java ``HashSet`` iterator returns first (``iterator().next()``).

    Elements are hashed with ``hash_fn`` (unsigned 32-bit).  The table grows like Java's
    (never shrinks); order = bucket index, then insertion order within the bucket.
    """

    __slots__ = ("_hash", "_items", "_seq", "_cap")

    def __init__(self, hash_fn) -> None:
        self._hash = hash_fn
        self._items: dict[Hashable, int] = {}
        self._seq = 0
        self._cap = 16

    def add(self, item: Hashable) -> None:
        if item in self._items:
            return
        self._items[item] = self._seq
        self._seq += 1
        while len(self._items) > self._cap * 3 // 4:
            self._cap *= 2

    def discard(self, item: Hashable) -> None:
        self._items.pop(item, None)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, item: Hashable) -> bool:
        return item in self._items

    def first(self) -> Hashable:
        mask = self._cap - 1
        return min(self._items, key=lambda it: (_spread(self._hash(it)) & mask, self._items[it]))
