"""Partitioners: where a record's key becomes a partition, for Kafka's Java client and others.

A partitioner is chosen by name (:data:`PARTITIONERS`), or given as a
:class:`Partitioner` instance, or as a kafka-python style callable
``fn(key_bytes, all_partitions, available_partitions) -> int``.

This module holds Kafka's own partitioners (Java client: ``murmur2``, ``round_robin``,
``round_robin_all``, ``ignore_keys``), the two skew fixes, the callable wrapper, the
registry and the vectorised helpers (:func:`partition_many`, :func:`partition_for_key`,
:func:`explain_keys`). The base class and its null-key strategies are in
:mod:`kafkasim.partitioning.base`; librdkafka's, Sarama's and murmur3 are in
:mod:`kafkasim.partitioning.other_clients`. Every name of both is re-exported here.

======================  ===========================================================  ==========
name                    rule for a key (``n`` partitions)                            key-pure?
======================  ===========================================================  ==========
``murmur2`` (default)   Java BuiltInPartitioner: ``toPositive(murmur2(key)) % n``;   yes
                        null key → sticky (KIP-480/794)
``round_robin``         Kafka ≤ 2.3 DefaultPartitioner: key → murmur2 as above;      yes
                        null key → per-record round robin
``round_robin_all``     Java ``RoundRobinPartitioner``: every record round robin,     no
                        key ignored
``ignore_keys``         ``partitioner.ignore.keys=true``: every record sticky         no
``consistent_random``   librdkafka's default: ``crc32(key) % n`` (unsigned);          yes (-1 for
                        null **or empty** key → sticky                                empty key)
``consistent``          librdkafka: ``crc32(key) % n``; empty key → crc32("")=0 → 0;  yes
                        null key → sticky
``murmur2_random``      librdkafka's Java-compatible one: ``(murmur2(key) &          yes
                        0x7fffffff) % n`` (empty key hashed); null key → sticky
``fnv1a``               Sarama's ``NewHashPartitioner``: ``p = int32(fnv1a(key)) %   yes
                        n`` (Go's truncating %), ``if p < 0: p = -p``; null key →
                        random per record (empty key hashed)
``murmur3``             for comparison: ``(mmh3.hash(key, 0) & 0x7fffffff) % n``;    yes
                        null key → sticky
``composite``           skew fix: murmur2 of ``key + b"@" + str(ts // bucket_ms)``   no
``hot_keys``            skew fix: named hot keys round robin over a dedicated        no
                        partition subset; other keys murmur2
======================  ===========================================================  ==========

*Key-pure* partitioners are pure functions of (key bytes, n) for every non-null key
(``consistent_random``: every non-empty key); :func:`partition_many` computes them
vectorised and returns ``-1`` where the key does not decide the partition.

Sticky (Java, KIP-794): a keyless record goes to the topic's current sticky partition;
after ``batch_size`` bytes were produced to it, the next keyless record picks a new one
uniformly at random (it may pick the same one again, as Kafka's BuiltInPartitioner can;
no adaptive load weighting: there is one broker). librdkafka's sticky is time based:
a new random partition every ``sticky_linger_ms`` (default 10, its
``sticky.partitioning.linger.ms``). All randomness comes from the seeded ``random.Random``
given to :meth:`Partitioner.bind`, so runs are reproducible; the draws are not Java's.

Thread-safety: a partitioner instance keeps per-topic state (sticky partition,
round-robin counters) and is **not** thread-safe; the Producer calls it under its
lock. The hash functions and :func:`partition_many` are pure and thread-safe.
"""

from __future__ import annotations

from typing import Callable, Iterable, Optional, Sequence, Union

import numpy as np

from kafkasim.errors import InvalidArgumentError, InvalidConfigurationError
from kafkasim.partitioning.base import (  # noqa: F401  (re-exported: tests and scenarios import them from here)
    DEFAULT_BATCH_SIZE, Partitioner, _check_n, _from_hash, _mask_null, murmur2_partition,
)
from kafkasim.partitioning.hashing import KeyColumn, murmur2, murmur2_many
from kafkasim.partitioning.other_clients import (
    ConsistentPartitioner, ConsistentRandomPartitioner, FnvPartitioner, Murmur2RandomPartitioner,
    Murmur3Partitioner,
)

__all__ = [
    "Partitioner", "DefaultPartitioner", "LegacyRoundRobinPartitioner", "RoundRobinPartitioner",
    "IgnoreKeysPartitioner", "ConsistentRandomPartitioner", "ConsistentPartitioner",
    "Murmur2RandomPartitioner", "FnvPartitioner", "Murmur3Partitioner",
    "CompositeKeyPartitioner", "HotKeyPartitioner", "CallablePartitioner",
    "PARTITIONERS", "KEY_PURE", "make_partitioner", "partition_many", "partition_for_key",
    "murmur2_partition", "DEFAULT_BATCH_SIZE", "explain_keys",
]


class DefaultPartitioner(Partitioner):
    """Java's default (BuiltInPartitioner): murmur2 for keys, sticky for null keys.

    Example: ``DefaultPartitioner().partition("t", b"abc", 4)`` == ``479470107 % 4`` == 3.
    """

    name = "murmur2"
    key_pure = True
    cache_size = 65536

    def key_hash(self, key: bytes) -> int:
        return murmur2(key)

    def bind(self, **kw) -> "Partitioner":
        super().bind(**kw)
        self._cache: dict = {}   # (key, n) -> partition: murmur2 is pure, so a cache is exact
        return self

    def partition(self, topic, key, num_partitions, timestamp_ms=None, size=0):
        if key is None:
            return self._sticky_java(topic, num_partitions, size)
        ck = (key, num_partitions)
        p = self._cache.get(ck)
        if p is None:
            p = (murmur2(key) & 0x7FFFFFFF) % num_partitions
            if len(self._cache) >= self.cache_size:
                self._cache.clear()
            self._cache[ck] = p
        return p

    def partition_many(self, keys, num_partitions):
        col = KeyColumn.of(keys)
        return _mask_null(col, _from_hash(murmur2_many(col), num_partitions))


class LegacyRoundRobinPartitioner(DefaultPartitioner):
    """Kafka ≤ 2.3's DefaultPartitioner: murmur2 for keys, per-record round robin for null keys.

    The counter starts at a (seeded) random value, as Java's did, and goes through
    ``toPositive(counter) % n``.
    """

    name = "round_robin"

    def partition(self, topic, key, num_partitions, timestamp_ms=None, size=0):
        if key is None:
            c = self._next_counter(topic, lambda: self.rng.getrandbits(32))
            return (c & 0x7FFFFFFF) % num_partitions
        return super().partition(topic, key, num_partitions, timestamp_ms, size)


class RoundRobinPartitioner(Partitioner):
    """Java's ``RoundRobinPartitioner``: every record, keyed or not, to the next partition (from 0)."""

    name = "round_robin_all"

    def partition(self, topic, key, num_partitions, timestamp_ms=None, size=0):
        return (self._next_counter(topic, lambda: 0) & 0x7FFFFFFF) % num_partitions


class IgnoreKeysPartitioner(Partitioner):
    """``partitioner.ignore.keys=true``: keys are ignored, every record is sticky."""

    name = "ignore_keys"

    def partition(self, topic, key, num_partitions, timestamp_ms=None, size=0):
        return self._sticky_java(topic, num_partitions, size)



class CompositeKeyPartitioner(Partitioner):
    """Skew fix: spread one key over time by hashing ``key + b"@" + str(timestamp_ms // bucket_ms)``.

    A hot key then moves partition every bucket; per-key order holds only *within* a
    bucket (the trade-off). Null key → sticky. Example with ``bucket_ms=60000``: key
    ``b"m1"`` at ts 125000 hashes ``b"m1@2"`` with murmur2.
    """

    name = "composite"

    def __init__(self, bucket_ms: int = 60_000) -> None:
        if bucket_ms < 1:
            raise InvalidArgumentError(f"bucket_ms must be >= 1, got {bucket_ms}")
        super().__init__()
        self.bucket_ms = bucket_ms

    def composite_key(self, key: bytes, timestamp_ms: int) -> bytes:
        return key + b"@" + str(timestamp_ms // self.bucket_ms).encode()

    def partition(self, topic, key, num_partitions, timestamp_ms=None, size=0):
        if key is None:
            return self._sticky_java(topic, num_partitions, size)
        ts = self.clock.now_ms() if timestamp_ms is None else timestamp_ms
        return murmur2_partition(self.composite_key(key, ts), num_partitions)


class HotKeyPartitioner(DefaultPartitioner):
    """Skew fix: named hot keys round robin over ``hot_partitions``; other keys murmur2.

    ``hot_partitions`` is a list of partition numbers (default: the last
    ``max(1, n // 4)`` partitions of the topic). Hot-key records lose per-key order
    (they are spread on purpose); all other keys keep Kafka's placement.
    """

    name = "hot_keys"
    key_pure = False

    def __init__(self, hot_keys: Iterable[Union[bytes, str]] = (),
                 hot_partitions: Optional[Sequence[int]] = None) -> None:
        super().__init__()
        self.hot_keys = frozenset(k.encode() if isinstance(k, str) else bytes(k) for k in hot_keys)
        self.hot_partitions = list(hot_partitions) if hot_partitions is not None else None

    def partition(self, topic, key, num_partitions, timestamp_ms=None, size=0):
        if key is not None and key in self.hot_keys:
            hot = self.hot_partitions
            if hot is None:
                k = max(1, num_partitions // 4)
                hot = list(range(num_partitions - k, num_partitions))
            bad = [p for p in hot if not 0 <= p < num_partitions]
            if bad or not hot:
                raise InvalidArgumentError(
                    f"hot_partitions {hot} must be non-empty and within [0, {num_partitions})")
            return hot[self._next_counter(topic, lambda: 0) % len(hot)]
        return super().partition(topic, key, num_partitions, timestamp_ms, size)

    def partition_many(self, keys, num_partitions):
        return Partitioner.partition_many(self, keys, num_partitions)


class CallablePartitioner(Partitioner):
    """Wraps a kafka-python style ``fn(key_bytes, all_partitions, available_partitions) -> int``."""

    name = "callable"

    def __init__(self, fn: Callable) -> None:
        super().__init__()
        self.fn = fn
        self.name = getattr(fn, "__name__", "callable")

    def partition(self, topic, key, num_partitions, timestamp_ms=None, size=0):
        parts = list(range(num_partitions))
        return self.fn(key, parts, parts)


PARTITIONERS: dict[str, type[Partitioner]] = {c.name: c for c in [
    DefaultPartitioner, LegacyRoundRobinPartitioner, RoundRobinPartitioner,
    IgnoreKeysPartitioner, ConsistentRandomPartitioner, ConsistentPartitioner,
    Murmur2RandomPartitioner, FnvPartitioner, Murmur3Partitioner,
    CompositeKeyPartitioner, HotKeyPartitioner,
]}
PARTITIONERS["default"] = DefaultPartitioner

KEY_PURE: tuple[str, ...] = tuple(n for n, c in PARTITIONERS.items() if c.key_pure and n != "default")
"""Names whose partition is a pure function of (key, n) for non-null keys: vectorisable."""


def make_partitioner(spec: Union[str, Partitioner, Callable, None] = None) -> Partitioner:
    """A partitioner from a name, an instance (returned as is) or a kafka-python callable."""
    if spec is None:
        return DefaultPartitioner()
    if isinstance(spec, Partitioner):
        return spec
    if isinstance(spec, type) and issubclass(spec, Partitioner):
        return spec()
    if isinstance(spec, str):
        cls = PARTITIONERS.get(spec)
        if cls is None:
            raise InvalidConfigurationError(
                f"Invalid value {spec!r} for configuration partitioner: "
                f"String must be one of: {', '.join(sorted(PARTITIONERS))}")
        return cls()
    if callable(spec):
        return CallablePartitioner(spec)
    raise InvalidConfigurationError(
        f"Invalid value {spec!r} for configuration partitioner: expected a name, a Partitioner "
        "or a callable")


_PURE_INSTANCES: dict[str, Partitioner] = {}


def partition_many(keys: Sequence[bytes], num_partitions: int,
                   partitioner: str = "murmur2") -> np.ndarray:
    """Partitions of many keys at once, as an ``int32`` numpy array (vectorised).

    For ``murmur2``: ``toPositive(murmur2(k)) % n`` for every key, equal element by
    element to the scalar path. ``keys`` may be a list of ``bytes``/``None``, a pandas
    Series or a pyarrow binary/string array. Where the key does not decide the partition
    (a ``None`` key; an empty key under ``consistent_random``) the result is ``-1``.
    Only key-pure partitioners (:data:`KEY_PURE`) are accepted.

    Example::

        >>> partition_many([b"21", b"abc", None], 4).tolist()
        [0, 3, -1]
    """
    _check_n(num_partitions)
    inst = _PURE_INSTANCES.get(partitioner)
    if inst is None:
        cls = PARTITIONERS.get(partitioner) if isinstance(partitioner, str) else None
        if cls is None:
            raise InvalidArgumentError(
                f"unknown partitioner {partitioner!r}; key-pure ones: {', '.join(KEY_PURE)}")
        inst = cls()
        if not cls.key_pure:
            inst.partition_many(keys, num_partitions)   # raises with the explanation
        _PURE_INSTANCES[partitioner] = inst
    return inst.partition_many(keys, num_partitions)


def partition_for_key(key: bytes, num_partitions: int, partitioner: str = "murmur2") -> int:
    """Scalar twin of :func:`partition_many` for one non-null key (-1 if the key does not decide)."""
    _check_n(num_partitions)
    cls = PARTITIONERS.get(partitioner)
    if cls is None or not cls.key_pure:
        raise InvalidArgumentError(
            f"partitioner {partitioner!r} is not key-pure; key-pure ones: {', '.join(KEY_PURE)}")
    if key is None or (cls is ConsistentRandomPartitioner and not key):
        return -1
    return cls().partition("", key, num_partitions)


def explain_keys(keys: Sequence[bytes], num_partitions: int,
                 partitioner: str = "murmur2") -> list[dict]:
    """For each key: ``{"partition": int, "hash": int}`` under a key-pure partitioner.

    ``hash`` is the partitioner's own hash (murmur2 signed; crc32 and fnv1a unsigned;
    murmur3 signed); ``partition`` is -1 where the key does not decide (an empty key
    under ``consistent_random``). Used by ``kafkasim partition``.

    Example::

        >>> explain_keys([b"abc"], 4)
        [{'partition': 3, 'hash': 479470107}]
    """
    _check_n(num_partitions)
    cls = PARTITIONERS.get(partitioner)
    if cls is None or not cls.key_pure:
        raise InvalidArgumentError(
            f"partitioner {partitioner!r} is not a pure function of the key; "
            f"choose one of: {', '.join(KEY_PURE)}")
    inst = cls()
    return [{"partition": partition_for_key(k, num_partitions, partitioner), "hash": inst.key_hash(k)}
            for k in keys]
