"""What every part of the broker shares: the state, the partition record, the lookups.

:class:`BrokerCore` is the base of the four parts :class:`kafkasim.broker.broker.Broker`
is made of (:mod:`~kafkasim.broker.lifecycle`, :mod:`~kafkasim.broker.admin`,
:mod:`~kafkasim.broker.data`, :mod:`~kafkasim.broker.group_api`). It declares the state
they share, set up by ``Lifecycle._open``:

- ``data_dir``, ``clock``, ``broker_id``, ``default_config`` (topic config defaults);
- ``_lock`` (re-entrant): guards ``_topics``, ``_partitions``, ``_meta`` and the
  producer-id block; ``_closed`` is set under it;
- ``_meta`` (:class:`~kafkasim.broker.metadata.MetadataStore`), ``_topics`` (name →
  :class:`~kafkasim.broker.metadata.TopicMetadata`), ``_partitions`` (TopicPartition →
  :class:`_Partition`);

and the lookups they all use: :meth:`BrokerCore._check_open` (a closed broker raises
:class:`~kafkasim.errors.BrokerNotAvailableError`), ``_topic``, ``_partition`` and the
partition-directory helpers.

Invariants: ``_partitions`` holds exactly the partitions of the topics in ``_topics``
(``<topic>-0 .. <topic>-(n-1)``), each over an open Log, while the broker is open; it is
empty once closed. A partition directory without topic metadata is never adopted.

Thread-safety: ``_partition`` reads ``_partitions`` without the lock (a dict lookup is
atomic; the produce/fetch hot path stays lock-free until the partition's own lock); every
other helper is called with ``_lock`` held.
"""

from __future__ import annotations

import os
import shutil
import threading
import uuid
import warnings
from typing import Optional

from kafkasim.arguments import check_arg
from kafkasim.clock import Clock
from kafkasim.config import LogConfig
from kafkasim.errors import BrokerNotAvailableError, UnknownTopicOrPartitionError
from kafkasim.storage.files import storage_errors
from kafkasim.storage.layout import partition_dir_name
from kafkasim.storage.log import Log
from kafkasim.types import TopicPartition

from kafkasim.broker.metadata import MetadataStore, TopicMetadata
from kafkasim.broker.producer_state import ProducerStateTable

__all__ = ["BrokerCore", "INTERNAL_TOPICS"]

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


class _Partition:
    """One hosted partition: its log, its produce lock and its idempotent-producer table."""

    __slots__ = ("log", "lock", "producers", "_name")

    def __init__(self, log: Log, name: str) -> None:
        self.log = log
        self.lock = threading.Lock()
        self.producers: Optional[ProducerStateTable] = None  # built on first idempotent produce
        self._name = name

    def producer_table(self) -> ProducerStateTable:
        if self.producers is None:
            table = ProducerStateTable(self._name)
            segments = self.log.segments
            start = segments[-1].base_offset if segments else self.log.log_start_offset
            start = max(start, self.log.log_start_offset)
            table.load(_headers_from(self.log, start))
            self.producers = table
        return self.producers


def _headers_from(log: Log, offset: int):
    end = log.log_end_offset
    while offset < end:
        batches = log.read_batches(offset, 8 * 1024 * 1024)
        if not batches:
            return
        for header, _ in batches:
            yield header
        offset = batches[-1][0].next_offset


class BrokerCore:
    """The shared state and lookups of the broker's parts (see the module docstring)."""

    data_dir: str
    clock: Clock
    broker_id: int
    default_config: LogConfig
    _lock: threading.RLock
    _closed: bool
    _meta: MetadataStore
    _topics: dict[str, TopicMetadata]
    _partitions: dict[TopicPartition, _Partition]

    def _check_open(self) -> None:
        if self._closed:
            raise BrokerNotAvailableError(
                f"The broker over {self.data_dir} is closed; open a new Broker on the data dir")

    def _topic(self, name: str) -> TopicMetadata:
        if type(name) is not str:
            check_arg("topic", name, "str")       # InvalidArgumentError naming it
        meta = self._topics.get(name)
        if meta is None:
            raise UnknownTopicOrPartitionError(f"Unknown topic: {name!r}")
        return meta

    def _partition(self, topic: str, partition: int) -> _Partition:
        part = self._partitions.get(TopicPartition(topic, partition))
        if part is None:
            with self._lock:
                self._check_open()
                meta = self._topic(topic)
                raise UnknownTopicOrPartitionError(
                    f"This server does not host this topic-partition: {topic}-{partition} "
                    f"(topic has partitions 0..{meta.partitions - 1})")
        return part

    def _config_of(self, meta: TopicMetadata) -> LogConfig:
        return self.default_config.with_overrides(meta.configs)

    def _open_partition(self, topic: str, partition: int, config: LogConfig) -> TopicPartition:
        tp = TopicPartition(topic, partition)
        path = os.path.join(self.data_dir, partition_dir_name(topic, partition))
        log = Log(path, config, self.clock)
        for line in log.recovery_report:
            warnings.warn(f"{tp}: {line}", RuntimeWarning, stacklevel=3)
        self._partitions[tp] = _Partition(log, str(tp))
        return tp

    def _drop_partition(self, tp: TopicPartition) -> None:
        part = self._partitions.pop(tp, None)
        path = os.path.join(self.data_dir, partition_dir_name(*tp))
        if part is not None:
            part.log.close()
        if os.path.isdir(path):
            # a short name: "<249-char topic>-<p>.<uuid>-delete" would pass the file-name limit
            doomed = os.path.join(self.data_dir, f"{uuid.uuid4().hex}-delete")
            with storage_errors("delete", path):
                os.rename(path, doomed)
                shutil.rmtree(doomed)

    def _discard_stale_dir(self, topic: str, partition: int) -> None:
        """A partition dir without topic metadata is a leftover: never adopt its data."""
        path = os.path.join(self.data_dir, partition_dir_name(topic, partition))
        if os.path.exists(path):
            with storage_errors("remove the stale partition directory", path):
                shutil.rmtree(path)
