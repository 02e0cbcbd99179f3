"""Injected time: every component asks a :class:`Clock`, never ``time.time()``.

Invariants:
- ``now_ms()`` never goes backwards on either clock.
- :class:`MockClock` only moves when told (``advance``/``sleep``/``set``), so a
  scenario driven by it is deterministic.
- :class:`PacedClock` is a MockClock that also waits, in real time, ``pace`` seconds per
  simulated second it moves: the same simulated times (so the same results), slowed down so a
  person can watch the run (``kafkasim scenario run NAME --view``).

Thread-safety: both clocks are safe to share between threads (SystemClock is lock-free).
"""

from __future__ import annotations

import threading
import time

__all__ = ["Clock", "SystemClock", "MockClock", "PacedClock"]


class Clock:
    """Source of wall-clock milliseconds. Subclasses implement ``now_ms`` and ``sleep``."""

    def now_ms(self) -> int:
        """Milliseconds since the Unix epoch."""
        raise NotImplementedError

    def sleep(self, ms: float) -> None:
        """Wait ``ms`` milliseconds (a simulated clock just advances)."""
        raise NotImplementedError


class SystemClock(Clock):
    """The real clock, made monotonic without a lock.

    ``now_ms()`` is the wall-clock time at construction advanced by the OS monotonic
    clock (``time.monotonic_ns``), which never goes backwards in any thread, so no
    lock or compare-and-set is needed on this hot path (the producer reads it once per
    ``send()``). Deliberate difference from a raw wall clock: a step of the system
    clock (e.g. an NTP jump) after construction is not followed; gradual NTP slewing
    is, as both clocks are slewed alike.
    """

    def __init__(self) -> None:
        # epoch ns at monotonic 0, so now = (mono + offset) // 1e6 is one add and one division
        self._offset_ns = time.time_ns() - time.monotonic_ns()

    def now_ms(self) -> int:
        return (time.monotonic_ns() + self._offset_ns) // 1_000_000

    def sleep(self, ms: float) -> None:
        if ms > 0:
            time.sleep(ms / 1000.0)


class MockClock(Clock):
    """A simulated clock that starts at ``start_ms`` and moves only when told.

    Example::

        >>> c = MockClock(1_000)
        >>> c.advance(250); c.now_ms()
        1250
    """

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        if start_ms < 0:
            raise ValueError(f"start_ms must be >= 0, got {start_ms}")
        self._now = int(start_ms)
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        with self._lock:
            return self._now

    def advance(self, ms: float) -> int:
        """Move the clock forward by ``ms`` (>= 0) and return the new time."""
        if ms < 0:
            raise ValueError(f"a clock cannot go backwards: advance({ms})")
        with self._lock:
            self._now += int(ms)
            return self._now

    def set(self, now_ms: int) -> None:
        """Jump to ``now_ms``, which must not be earlier than the current time."""
        with self._lock:
            if now_ms < self._now:
                raise ValueError(f"a clock cannot go backwards: set({now_ms}) < {self._now}")
            self._now = int(now_ms)

    def sleep(self, ms: float) -> None:
        if ms > 0:
            self.advance(ms)


class PacedClock(MockClock):
    """A :class:`MockClock` that waits ``pace`` real seconds per simulated second it moves.

    Simulated time, and so every result, is exactly a MockClock's; only the wall time the run
    takes changes (the wait happens outside the lock, after the clock has moved).

    Example::

        >>> c = PacedClock(1_000, pace=0.001)   # one simulated second takes one real millisecond
        >>> c.advance(2_000)
        3000
    """

    def __init__(self, start_ms: int = 1_700_000_000_000, *, pace: float) -> None:
        if not (isinstance(pace, (int, float)) and 0 <= pace <= 60):
            raise ValueError(f"pace must be between 0 and 60 real seconds per simulated second, got {pace!r}")
        super().__init__(start_ms)
        self.pace = float(pace)

    def advance(self, ms: float) -> int:
        now = super().advance(ms)
        if self.pace and ms > 0:
            time.sleep(ms / 1000.0 * self.pace)
        return now

    def set(self, now_ms: int) -> None:
        before = self.now_ms()
        super().set(now_ms)
        if self.pace and now_ms > before:
            time.sleep((now_ms - before) / 1000.0 * self.pace)
