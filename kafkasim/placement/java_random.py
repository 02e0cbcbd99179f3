"""Java's random number sources, bit for bit, for placers that must match Kafka's tests.

Kafka's ``StripedReplicaPlacer`` draws from a ``java.util.Random``: ``nextInt(bound)``
and ``Collections.shuffle(list, random)``. Its tests inject Kafka's ``MockRandom`` (a
64-bit linear congruential generator, state 17 by default). To reproduce the expected
placements exactly, kafkasim implements the same generators and the same derived
operations instead of Python's ``random``:

- :class:`JavaRandom` — ``java.util.Random(seed)``: 48-bit LCG, multiplier
  ``0x5DEECE66D``, increment ``0xB``, seed scrambled with the multiplier.
- :class:`MockRandom` — ``org.apache.kafka.server.util.MockRandom``: 64-bit state,
  ``state = state * 2862933555777941757 + 3037000493`` (mod 2**64), ``next(bits)`` is the
  top ``bits`` bits.
- ``next_int(bound)`` is ``Random.nextInt(int bound)`` (power-of-two fast path, else
  rejection of the last incomplete range), ``shuffle`` is ``Collections.shuffle`` (for
  ``i`` from ``size`` down to 2: swap ``i - 1`` with ``nextInt(i)``).

Invariants: the same seed gives the same sequence as the JVM. Thread-safety: an instance
holds mutable state; do not share one between threads.
"""

from __future__ import annotations

from typing import MutableSequence

__all__ = ["JavaRandom", "MockRandom"]

_MASK64 = (1 << 64) - 1


class _JavaRandomBase:
    """``nextInt(bound)`` and ``Collections.shuffle`` on top of a subclass's ``next(bits)``."""

    def next(self, bits: int) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def next_int(self, bound: int) -> int:
        """``java.util.Random.nextInt(bound)``: uniform in ``[0, bound)``."""
        if bound <= 0:
            raise ValueError(f"bound must be positive, got {bound}")
        r = self.next(31)
        m = bound - 1
        if bound & m == 0:
            return (bound * r) >> 31
        u = r
        while True:
            r = u % bound
            if u - r + m < 1 << 31:  # Java: u - r + m < 0 means the int overflowed
                return r
            u = self.next(31)

    def shuffle(self, items: MutableSequence) -> None:
        """``java.util.Collections.shuffle(items, this)``, in place."""
        for i in range(len(items), 1, -1):
            j = self.next_int(i)
            items[i - 1], items[j] = items[j], items[i - 1]


class JavaRandom(_JavaRandomBase):
    """``new java.util.Random(seed)``."""

    _MULT = 0x5DEECE66D
    _MASK48 = (1 << 48) - 1

    def __init__(self, seed: int = 0) -> None:
        self._seed = (seed ^ self._MULT) & self._MASK48

    def next(self, bits: int) -> int:
        self._seed = (self._seed * self._MULT + 0xB) & self._MASK48
        value = self._seed >> (48 - bits)
        return value - (1 << 32) if bits == 32 and value >= 1 << 31 else value


class MockRandom(_JavaRandomBase):
    """Kafka's test ``MockRandom(state=17)``: the source StripedReplicaPlacerTest injects."""

    def __init__(self, state: int = 17) -> None:
        self._state = state & _MASK64

    def next(self, bits: int) -> int:
        self._state = (self._state * 2862933555777941757 + 3037000493) & _MASK64
        value = self._state >> (64 - bits)
        return value - (1 << 32) if bits == 32 and value >= 1 << 31 else value
