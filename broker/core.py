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
  :class:`~kafkasim.broker.replica.PartitionState`: replicas, leader, ISR, epoch, HW);

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
from kafkasim.errors import BrokerNotAvailableError, KafkaStorageError, UnknownTopicOrPartitionError
from kafkasim.storage.files import storage_errors
from kafkasim.storage.layout import partition_dir_name
from kafkasim.storage.log import Log
from kafkasim.types import TopicPartition

from kafkasim.broker.metadata import MetadataStore, TopicMetadata
from kafkasim.broker.replica import PartitionState

__all__ = ["BrokerCore", "INTERNAL_TOPICS"]

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


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
    _partitions: dict[TopicPartition, PartitionState]
    _finalized_levels: dict[str, int]        # feature -> finalized level (meta/features.json)
    _finalized_features_epoch: int
    _offline_log_dirs: frozenset = frozenset()
    """Ids of the brokers whose log directory is offline (disk full): empty on the hot path."""

    def _check_open(self) -> None:
        if self._closed:
            raise BrokerNotAvailableError(
                f"The broker over {self.data_dir} is closed; open a new Broker on the data dir")

    def _check_node(self, node: int) -> None:
        """A client request addressed to broker ``node``: a cluster refuses one that is down
        or isolated (NetworkError); the one broker answers, and leadership is checked after."""

    def _check_log_dir(self, part: PartitionState, node: Optional[int]) -> None:
        """A request for ``part`` on broker ``node`` (None: its leader) whose log directory is
        offline: KafkaStorageError, as Kafka's ``ReplicaManager`` answers for a partition in an
        offline directory (``HostedPartition.Offline``). Called only while some directory is."""
        b = part.leader if node is None else node
        if b in self._offline_log_dirs and b in part.hosted:
            raise KafkaStorageError(f"{part.name}: the log directory of broker {b} is offline "
                                    "(disk full); its replica is not available")

    def _topic(self, name: str) -> TopicMetadata:
        if type(name) is not str:
            check_arg("topic", name, "str")       # InvalidArgumentError naming it
        meta = self._topics.get(name)
        if meta is None:
            raise UnknownTopicOrPartitionError(f"Unknown topic: {name!r}")
        return meta

    def _partition(self, topic: str, partition: int) -> PartitionState:
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

    def _partition_path(self, broker_id: int, topic: str, partition: int) -> str:
        """Where ``broker_id`` keeps its replica: ``data_dir/<topic>-<p>`` for the one broker
        (a cluster overrides it: ``data_dir/broker-<id>/<topic>-<p>``)."""
        return os.path.join(self.data_dir, partition_dir_name(topic, partition))

    def _open_partition(self, topic: str, partition: int, config: LogConfig) -> TopicPartition:
        """Open the partition's replica logs and its replication state; the one broker is
        replica, leader and ISR (a cluster overrides :meth:`_new_partition_state`)."""
        tp = TopicPartition(topic, partition)
        self._partitions[tp] = self._new_partition_state(tp, config)
        return tp

    def _open_replica_log(self, broker_id: int, tp: TopicPartition, config: LogConfig) -> Log:
        log = Log(self._partition_path(broker_id, *tp), config, self.clock)
        for line in log.recovery_report:
            warnings.warn(f"{tp}: {line}", RuntimeWarning, stacklevel=4)
        return log

    def _new_partition_state(self, tp: TopicPartition, config: LogConfig) -> PartitionState:
        log = self._open_replica_log(self.broker_id, tp, config)
        return PartitionState(str(tp), [self.broker_id], {self.broker_id: log}, self.clock,
                              leader=self.broker_id, isr=[self.broker_id])

    def _drop_partition(self, tp: TopicPartition) -> None:
        part = self._partitions.pop(tp, None)
        paths = [self._partition_path(b, *tp) for b in self._replica_ids(tp, part)]
        if part is not None:
            for r in part.hosted.values():
                r.log.close()
        for path in paths:
            if os.path.isdir(path):
                # a short name: "<249-char topic>-<p>.<uuid>-delete" would pass the file-name limit
                doomed = os.path.join(os.path.dirname(path), f"{uuid.uuid4().hex}-delete")
                with storage_errors("delete", path):
                    os.rename(path, doomed)
                    shutil.rmtree(doomed)

    def _replica_ids(self, tp: TopicPartition, part: Optional[PartitionState]) -> list[int]:
        return list(part.hosted) if part is not None else [self.broker_id]

    def _discard_stale_dir(self, topic: str, partition: int) -> None:
        """A partition dir without topic metadata is a leftover: never adopt its data."""
        for b in self._replica_ids(TopicPartition(topic, partition), None):
            self._discard_stale_path(self._partition_path(b, topic, partition))

    def _discard_stale_path(self, path: str) -> None:
        if os.path.exists(path):
            with storage_errors("remove the stale partition directory", path):
                shutil.rmtree(path)
