"""Partitioners of other clients than Kafka's Java one: librdkafka, Sarama, and murmur3.

- librdkafka (C/C++, confluent-kafka-python, most non-JVM clients): ``consistent_random``
  (its default), ``consistent`` and ``murmur2_random``; a null key goes to a sticky
  partition that changes every ``sticky_linger_ms`` (librdkafka's
  ``sticky.partitioning.linger.ms``, default 10) of the injected clock.
- Sarama (Go): ``fnv1a`` (``NewHashPartitioner``); a null key goes to a random partition.
- ``murmur3``: for comparison only (no client uses it), with Kafka's sign rule.

Each rule, with the null/empty-key cases, is in the table of
:mod:`kafkasim.partitioning.partitioners`, which registers these classes by name and
re-exports them (``from kafkasim.partitioning.partitioners import FnvPartitioner`` works).

Thread-safety: as :class:`~kafkasim.partitioning.base.Partitioner` (instances are not
thread-safe; the producer calls them under its lock).
"""

from __future__ import annotations

import zlib

import mmh3
import numpy as np

from kafkasim.partitioning.base import Partitioner, _from_hash, _mask_null
from kafkasim.partitioning.hashing import (
    KeyColumn, crc32_many, fnv1a32, fnv1a32_many, murmur2, murmur2_many, murmur3_many,
)

__all__ = ["ConsistentRandomPartitioner", "ConsistentPartitioner", "Murmur2RandomPartitioner",
           "FnvPartitioner", "Murmur3Partitioner"]


class _LibrdkafkaPartitioner(Partitioner):
    sticky_linger_ms = 10  # librdkafka's sticky.partitioning.linger.ms default

    def __init__(self, sticky_linger_ms: int = 10) -> None:
        super().__init__()
        self.sticky_linger_ms = sticky_linger_ms


class ConsistentRandomPartitioner(_LibrdkafkaPartitioner):
    """librdkafka's default ``consistent_random``: ``crc32(key) % n``; null or empty key → sticky."""

    name = "consistent_random"
    key_pure = True

    def key_hash(self, key: bytes) -> int:
        return zlib.crc32(key)

    def partition(self, topic, key, num_partitions, timestamp_ms=None, size=0):
        if not key:
            return self._sticky_librdkafka(topic, num_partitions, self.sticky_linger_ms)
        return zlib.crc32(key) % num_partitions

    def partition_many(self, keys, num_partitions):
        col = KeyColumn.of(keys)
        out = (crc32_many(col) % np.uint32(num_partitions)).astype(np.int32)
        out[np.diff(col.offsets) == 0] = -1   # null and empty keys are not key-decided
        return out


class ConsistentPartitioner(_LibrdkafkaPartitioner):
    """librdkafka's ``consistent``: ``crc32(key) % n`` (an empty key → partition 0); null → sticky."""

    name = "consistent"
    key_pure = True

    def key_hash(self, key: bytes) -> int:
        return zlib.crc32(key)

    def partition(self, topic, key, num_partitions, timestamp_ms=None, size=0):
        if key is None:
            return self._sticky_librdkafka(topic, num_partitions, self.sticky_linger_ms)
        return zlib.crc32(key) % num_partitions

    def partition_many(self, keys, num_partitions):
        col = KeyColumn.of(keys)
        return _mask_null(col, (crc32_many(col) % np.uint32(num_partitions)).astype(np.int32))


class Murmur2RandomPartitioner(_LibrdkafkaPartitioner):
    """librdkafka's ``murmur2_random``: Java-compatible murmur2 (empty key hashed); null → sticky."""

    name = "murmur2_random"
    key_pure = True

    def key_hash(self, key: bytes) -> int:
        return murmur2(key)

    def partition(self, topic, key, num_partitions, timestamp_ms=None, size=0):
        if key is None:
            return self._sticky_librdkafka(topic, num_partitions, self.sticky_linger_ms)
        return (murmur2(key) & 0x7FFFFFFF) % num_partitions

    def partition_many(self, keys, num_partitions):
        col = KeyColumn.of(keys)
        return _mask_null(col, _from_hash(murmur2_many(col), num_partitions))


def _sarama_fnv(h_unsigned: int, n: int) -> int:
    h = h_unsigned - 0x100000000 if h_unsigned & 0x80000000 else h_unsigned
    p = abs(h) % n           # Go: int32(h) % n truncates toward zero; then p = -p if p < 0
    return p


class FnvPartitioner(Partitioner):
    """Sarama's ``NewHashPartitioner``: FNV-1a 32, ``int32(h) % n`` then abs; null key → random.

    (librdkafka's ``fnv1a`` partitioner gives the same partitions for non-null keys:
    it takes ``abs`` of the signed hash before an unsigned ``%``.)
    """

    name = "fnv1a"
    key_pure = True

    def key_hash(self, key: bytes) -> int:
        return fnv1a32(key)

    def partition(self, topic, key, num_partitions, timestamp_ms=None, size=0):
        if key is None:
            return self.rng.randrange(num_partitions)
        return _sarama_fnv(fnv1a32(key), num_partitions)

    def partition_many(self, keys, num_partitions):
        col = KeyColumn.of(keys)
        signed = fnv1a32_many(col).view(np.int32).astype(np.int64)
        out = np.abs(np.fmod(signed, num_partitions)).astype(np.int32)
        return _mask_null(col, out)


class Murmur3Partitioner(Partitioner):
    """For comparison: ``(mmh3.hash(key, seed=0) & 0x7fffffff) % n`` (Kafka's sign rule); null → sticky."""

    name = "murmur3"
    key_pure = True

    def key_hash(self, key: bytes) -> int:
        return mmh3.hash(key, 0, True)

    def partition(self, topic, key, num_partitions, timestamp_ms=None, size=0):
        if key is None:
            return self._sticky_java(topic, num_partitions, size)
        return (mmh3.hash(key, 0, True) & 0x7FFFFFFF) % num_partitions

    def partition_many(self, keys, num_partitions):
        col = KeyColumn.of(keys)
        return _mask_null(col, _from_hash(murmur3_many(col), num_partitions))

