"""The recent injected faults, for the live view: ``<data_dir>/.server-faults.json``.

Every request a fault rule acts on (:mod:`kafkasim.faults`) is one or more
:class:`~kafkasim.faults.FaultEvent` s in ``Faults.events()``. The live view
(:mod:`kafkasim.view`) reads files only, so ``kafkasim serve`` writes the last
:data:`KEEP_EVENTS` of them here, at most once per ``interval_s`` (a quarter of a second)
while faults happen, so a fault shows within a moment of the request it hit (the view
flashes the partition, or the broker when the event names no partition).

Content::

    {"pid": 1234, "written_ms": 1764280000000,
     "events": [{"time_ms", "rule_id", "broker", "api", "client_id",
                 "action",            # "error", "latency", "drop-before", "drop-after", "throttle"
                 "partitions": [{"topic", "partition"}],    # [] when the rule named none
                 "error_code", "error_name", "latency_ms"}]}

oldest first; ``time_ms`` is the fault rules' clock (wall time in ``kafkasim serve``).
Written to a temporary name and renamed (a reader sees a whole file); not fsynced: a hint,
not state. ``kafkasim serve`` removes it on a clean shutdown, with the address file.

:func:`fault_actions` names what one decision did (the ``action`` label of
``kafkasim_faults_injected_total``).

Thread-safety: :meth:`FaultEventsFile.noted` and :meth:`FaultEventsFile.flush` run on the
server's event loop thread.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Optional

from kafkasim.errors import KAFKA_ERROR_NAMES
from kafkasim.faults import FaultDecision
from kafkasim.server.side_files import remove_side_file, write_side_file

__all__ = ["FAULTS_FILE", "KEEP_EVENTS", "FaultEventsFile", "fault_actions"]


FAULTS_FILE = ".server-faults.json"
KEEP_EVENTS = 200


def fault_actions(decision: FaultDecision) -> list[str]:
    """What ``decision`` does to its request, each once: ``error`` (whole request or some of
    its partitions), ``latency``, ``throttle``, ``drop-before`` or ``drop-after``."""
    out = []
    if decision.error is not None or decision.partition_errors:
        out.append("error")
    if decision.latency_ms:
        out.append("latency")
    if decision.throttle_ms:
        out.append("throttle")
    if decision.drop is not None:
        out.append(f"drop-{decision.drop}")
    return out


class FaultEventsFile:
    """Writes the last :data:`KEEP_EVENTS` fault events to the data dir (module docstring)."""

    def __init__(self, data_dir: str, *, interval_s: float = 0.25, keep: int = KEEP_EVENTS) -> None:
        self.path = os.path.join(data_dir, FAULTS_FILE)
        self.interval_s = interval_s
        self.keep = keep
        self._faults = None
        self._pending: Optional[asyncio.TimerHandle] = None

    def noted(self, faults) -> None:
        """A request of ``faults`` (a :class:`~kafkasim.faults.Faults`) was faulted: write soon."""
        self._faults = faults
        if self._pending is None:
            self._pending = asyncio.get_running_loop().call_later(self.interval_s, self.flush)

    def flush(self) -> None:
        """Write the file now (atomic rename); a failure is logged, never raised to a client."""
        self._pending = None
        events = self._faults.events()[-self.keep:] if self._faults is not None else []
        rows = [{"time_ms": e.time_ms, "rule_id": e.rule_id, "broker": e.broker, "api": e.api,
                 "client_id": e.client_id, "action": e.action,
                 "partitions": [{"topic": t, "partition": p} for t, p in e.partitions],
                 "error_code": e.error_code,
                 "error_name": KAFKA_ERROR_NAMES.get(e.error_code) if e.error_code is not None else None,
                 "latency_ms": e.latency_ms} for e in events]
        write_side_file(self.path, {"pid": os.getpid(), "written_ms": int(time.time() * 1000), "events": rows})

    def remove(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        remove_side_file(self.path)
