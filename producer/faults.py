"""Fault injection for the producer: lose a produce request, or its response.

A real network loses requests and responses; the in-process broker never does, so the
reorder and duplicate labs inject the loss here, between the sender and
``Broker.produce``:

- :data:`LOST_REQUEST` — the request never reached the broker: nothing is written, the
  attempt fails with a retriable :class:`~kafkasim.errors.NetworkError`;
- :data:`LOST_RESPONSE` — the broker appended the batch but the response was lost: the
  attempt fails the same way, so a retry writes the batch again unless the producer is
  idempotent (then the broker recognises the duplicate).

Which attempts fail is decided by :meth:`FaultInjector.fault_for`: the
``fault_injector`` callable ``fn(tp, batch_no, attempt) -> None | LOST_REQUEST |
LOST_RESPONSE`` when given, else a draw with probability ``fault_rate`` on a batch's
**first** attempt only, of kind ``fault_mode``, from an RNG seeded with the producer's
``seed`` (``random.Random(f"{seed}:faults")``), so a run is reproducible.

Thread-safety: not thread-safe; the sender calls it under the producer's send lock.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Optional

from kafkasim.errors import NetworkError
from kafkasim.types import TopicPartition

__all__ = ["LOST_REQUEST", "LOST_RESPONSE", "FAULT_MODES", "FaultInjector"]

LOST_REQUEST = "lost_request"
"""Fault: the produce request never reached the broker (nothing written)."""
LOST_RESPONSE = "lost_response"
"""Fault: the broker appended the batch but the response was lost (a retry may duplicate)."""
FAULT_MODES = (LOST_REQUEST, LOST_RESPONSE)


class FaultInjector:
    """Decides, per produce attempt, whether the request or its response is lost (see module doc)."""

    def __init__(self, fault_rate: float = 0.0, fault_mode: str = LOST_REQUEST,
                 fault_injector: Optional[Callable[[TopicPartition, int, int], Optional[str]]] = None,
                 seed: Any = 0) -> None:
        self.rate = float(fault_rate)
        self.mode = fault_mode
        self.injector = fault_injector
        self._rng = random.Random(f"{seed}:faults")

    def fault_for(self, tp: TopicPartition, batch_no: int, attempt: int) -> Optional[str]:
        """The fault for attempt ``attempt`` (1-based) of batch ``batch_no`` of ``tp``, or None."""
        if self.injector is not None:
            return self.injector(tp, batch_no, attempt)
        if self.rate and attempt == 1 and self._rng.random() < self.rate:
            return self.mode
        return None

    @staticmethod
    def lost_request(tp: TopicPartition, batch_no: int, attempt: int) -> NetworkError:
        """The error of an attempt whose request was lost."""
        return NetworkError(
            f"injected fault: produce request for {tp} batch #{batch_no} "
            f"(attempt {attempt}) was lost before reaching the broker")

    @staticmethod
    def lost_response(tp: TopicPartition, batch_no: int, attempt: int, offset: int) -> NetworkError:
        """The error of an attempt whose response was lost (the batch is at ``offset``)."""
        return NetworkError(
            f"injected fault: the response for {tp} batch #{batch_no} (attempt {attempt}) "
            f"was lost after the broker appended it at offset {offset}")
