"""The partitioner base class and the pieces every partitioner shares.

- :class:`Partitioner`: the interface (``partition(topic, key, n, timestamp_ms, size)``,
  ``key_hash``, ``partition_many``) plus the null-key strategies its subclasses share:
  Java's sticky partition (KIP-794: a new random partition after ``batch_size`` bytes),
  librdkafka's time-based sticky partition (a new one every ``sticky_linger_ms``) and a
  per-topic round-robin counter.
- :func:`murmur2_partition`: Java's ``BuiltInPartitioner.partitionForKey``.
- ``_from_hash`` / ``_mask_null``: the vectorised ``toPositive(h) % n`` and the ``-1``
  marking of null keys, used by every key-pure subclass's ``partition_many``.

The concrete partitioners live in :mod:`kafkasim.partitioning.partitioners` (Kafka's own
and the skew fixes, plus the registry) and :mod:`kafkasim.partitioning.other_clients`
(librdkafka, Sarama, murmur3); the table of all of them is in the former's docstring.

Thread-safety: a partitioner instance keeps per-topic state (sticky partition,
round-robin counters) and is **not** thread-safe; the Producer calls it under its lock.
The helper functions are pure and thread-safe.
"""

from __future__ import annotations

import random
from typing import Callable, Optional

import numpy as np

from kafkasim.clock import Clock, SystemClock
from kafkasim.errors import InvalidArgumentError, InvalidPartitionsError
from kafkasim.partitioning.hashing import KeyColumn, murmur2

__all__ = ["Partitioner", "murmur2_partition", "DEFAULT_BATCH_SIZE"]

DEFAULT_BATCH_SIZE = 16384


def _check_n(num_partitions: int) -> None:
    if num_partitions < 1:
        raise InvalidPartitionsError(f"num_partitions must be >= 1, got {num_partitions}")


def murmur2_partition(key: bytes, num_partitions: int) -> int:
    """Java's ``BuiltInPartitioner.partitionForKey``: ``toPositive(murmur2(key)) % n``."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


class Partitioner:
    """Base class. Subclasses set ``name``/``key_pure`` and implement :meth:`partition`.

    ``partition(topic, key, num_partitions, timestamp_ms, size)`` returns a partition in
    ``[0, num_partitions)``. ``size`` is the record's estimated size in bytes (used by the
    sticky logic); ``timestamp_ms`` the record's timestamp (used by ``composite``).
    """

    name = "custom"
    key_pure = False

    def __init__(self) -> None:
        self.bind()

    def bind(self, *, clock: Optional[Clock] = None, rng: Optional[random.Random] = None,
             batch_size: int = DEFAULT_BATCH_SIZE) -> "Partitioner":
        """Attach the producer's clock, seeded RNG and ``batch_size``; resets per-topic state."""
        self.clock = clock or SystemClock()
        self.rng = rng or random.Random(0)
        self.batch_size = batch_size
        self._sticky: dict[str, list] = {}      # topic -> [partition, produced_bytes or switch_ms]
        self._counters: dict[str, int] = {}
        return self

    def partition(self, topic: str, key: Optional[bytes], num_partitions: int,
                  timestamp_ms: Optional[int] = None, size: int = 0) -> int:
        raise NotImplementedError

    def key_hash(self, key: bytes) -> int:
        """The hash this partitioner applies to a key (key-pure partitioners only)."""
        raise InvalidArgumentError(f"partitioner {self.name!r} does not hash keys alone")

    def partition_many(self, keys, num_partitions: int) -> np.ndarray:
        """Vectorised partitions of non-null keys (key-pure partitioners only); -1 = not key-decided."""
        from kafkasim.partitioning.partitioners import KEY_PURE   # the registry sits above this module
        raise InvalidArgumentError(
            f"partitioner {self.name!r} is not a pure function of (key, num_partitions); "
            f"key-pure ones: {', '.join(KEY_PURE)}")

    # -- null-key strategies shared by subclasses ------------------------------------

    def _sticky_java(self, topic: str, n: int, size: int) -> int:
        """KIP-794: keep the sticky partition until ``batch_size`` bytes went to it."""
        state = self._sticky.get(topic)
        if state is None or state[1] >= self.batch_size or state[0] >= n:
            state = self._sticky[topic] = [self.rng.randrange(n), 0]
        state[1] += size
        return state[0]

    def _sticky_librdkafka(self, topic: str, n: int, linger_ms: int) -> int:
        """librdkafka: a new random sticky partition every ``linger_ms`` of the clock."""
        now = self.clock.now_ms()
        state = self._sticky.get(topic)
        if state is None or now - state[1] >= linger_ms or state[0] >= n:
            state = self._sticky[topic] = [self.rng.randrange(n), now]
        return state[0]

    def _next_counter(self, topic: str, start: Callable[[], int]) -> int:
        c = self._counters.get(topic)
        if c is None:
            c = start()
        self._counters[topic] = (c + 1) & 0xFFFFFFFF
        return c

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def _from_hash(h: np.ndarray, n: int) -> np.ndarray:
    """``toPositive(h) % n`` on an int32 array."""
    return ((h.view(np.uint32) & np.uint32(0x7FFFFFFF)) % np.uint32(n)).astype(np.int32)


def _mask_null(col: KeyColumn, out: np.ndarray) -> np.ndarray:
    if col.null is not None:
        out[col.null] = -1
    return out
