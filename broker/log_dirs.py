"""The one broker's disk-full fault: its log directory goes offline (Kafka's log-dir failure).

:class:`LogDirFaults` is a part of :class:`kafkasim.broker.broker.Broker` (a
:class:`~kafkasim.broker.cluster.Cluster` overrides both calls per broker:
:mod:`kafkasim.broker.faults`):

- :meth:`LogDirFaults.fill_disk`: every append to the broker's logs fails with
  :class:`~kafkasim.errors.KafkaStorageError` before a byte is written
  (``Log.refuse_writes``), and its log directory goes offline at once, as Kafka's
  ``LogDirFailureChannel`` takes it offline on the first failed write: every produce, fetch
  and list-offsets of a partition answers ``KafkaStorageError`` (``KAFKA_STORAGE_ERROR``, 56,
  over the wire), as Kafka's ``ReplicaManager`` does for a partition in an offline directory.
- :meth:`LogDirFaults.clear_disk`: appends to the logs go through again, but the directory
  stays offline until the broker restarts: close it and open a new ``Broker`` on the data
  dir (the fault lives in this object, not on disk).

Kafka with its only log directory failed halts the broker (``Shutdown broker because all
log dirs in ... have failed``); kafkasim keeps it answering, as Kafka does for one failed
directory of several (docs/differences.md).

Thread-safety: both take the broker's metadata lock.
"""

from __future__ import annotations

from typing import Optional

from kafkasim.arguments import bad_arg
from kafkasim.errors import InvalidArgumentError

from kafkasim.broker.core import BrokerCore

__all__ = ["LogDirFaults", "DISK_FULL"]

DISK_FULL = "No space left on device"
"""The reason a full disk's appends give (ENOSPC's message)."""


class LogDirFaults(BrokerCore):
    """``fill_disk`` / ``clear_disk`` of the one broker (see the module docstring)."""

    _disk_full = False

    def fill_disk(self, broker_id: Optional[int] = None) -> None:
        """Fill the broker's disk (``broker_id``: None or this broker's id): appends fail, the
        log directory goes offline. InvalidArgumentError when it is already full."""
        with self._lock:
            self._check_open()
            self._own_id(broker_id)
            if self._disk_full:
                raise InvalidArgumentError(f"broker {self.broker_id}'s disk is already full (clear_disk first)")
            self._disk_full = True
            self._offline_log_dirs = frozenset({self.broker_id})
            for part in self._partitions.values():
                for log in part.logs():
                    log.refuse_writes(DISK_FULL)

    def clear_disk(self, broker_id: Optional[int] = None) -> None:
        """Free the disk: appends go through again; the log directory stays offline until the
        broker is reopened. InvalidArgumentError when the disk is not full."""
        with self._lock:
            self._check_open()
            self._own_id(broker_id)
            if not self._disk_full:
                raise InvalidArgumentError(f"broker {self.broker_id}'s disk is not full")
            self._disk_full = False
            for part in self._partitions.values():
                for log in part.logs():
                    log.refuse_writes(None)

    @property
    def log_dir_offline(self) -> bool:
        """Whether the broker's log directory is offline (its partitions with it)."""
        return self.broker_id in self._offline_log_dirs

    def _own_id(self, broker_id: Optional[int]) -> None:
        if broker_id is not None and broker_id != self.broker_id:
            raise bad_arg("broker_id", broker_id, f"None or this broker's id {self.broker_id}")
