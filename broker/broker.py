"""The in-process broker: topics over per-partition logs, and the request API.

``Broker(data_dir)`` owns every topic under ``data_dir``: create, list, describe,
delete, add partitions (forward only), produce (append one batch to a partition →
base offset), fetch (records from an offset, up to max bytes) and list offsets
(earliest, latest, for a timestamp). The API contract is broker/API.md.

The class is assembled from one module per job, each a mixin over the shared state of
:class:`kafkasim.broker.core.BrokerCore`:

==============================  ==============================================================
:mod:`kafkasim.broker.lifecycle`  open (data-dir lock, recovery, load), periodic maintenance
                                  (LogCleaner: retention, compaction, ``flush.ms``), flush, close
:mod:`kafkasim.broker.admin`      create/list/describe/delete topics, add partitions, alter configs,
                                  delete records (DeleteRecords)
:mod:`kafkasim.broker.data`       produce, fetch, list offsets, producer ids (the hot paths)
:mod:`kafkasim.broker.group_api`  the group API, delegated to the group coordinator
:mod:`kafkasim.broker.consumer_group_api`  consumer groups (KIP-848): ConsumerGroupHeartbeat/Describe
:mod:`kafkasim.broker.elections`  ElectLeaders: preferred and unclean elections
:mod:`kafkasim.broker.reassignments`  Alter/ListPartitionReassignments (a cluster moves replicas)
:mod:`kafkasim.broker.log_dirs`   the disk-full fault: the log directory goes offline
==============================  ==============================================================

Why mixins rather than composition: the four jobs share one state (the metadata lock, the
topic table, the partitions) and Kafka's API is one object, so callers keep a single
``Broker``; produce and fetch stay one method call with no delegation hop on the hot path;
and each module still reads on its own, with the state it may touch declared once in
``BrokerCore``.

Invariants:
- A topic exists iff its metadata file exists (broker/metadata.py); its partitions
  are ``<topic>-0 .. <topic>-(n-1)`` under ``data_dir``, each a :class:`kafkasim.storage.log.Log`.
- Validation happens before anything touches the disk: a bad name, partition count,
  replication factor or config raises and leaves nothing behind.
- Offsets in a partition are contiguous; an idempotent producer's retried batch is
  never written twice (broker/producer_state.py).
- A new Broker over the same data dir sees every topic, config and flushed record.
- After ``close()`` every call raises :class:`~kafkasim.errors.BrokerNotAvailableError`
  (group calls: ``CoordinatorNotAvailableError``), never a bare ``KeyError``.

Thread-safety: every public method may be called from any thread. Topic metadata is
guarded by one lock; produce takes a per-partition lock around the idempotence check
and the append, and each Log guards itself.

Every partition is a :class:`kafkasim.broker.replica.PartitionState`; here it has one
replica (this broker leads every partition, epoch 0), and
:class:`kafkasim.broker.cluster.Cluster` runs the same code with several. Deliberate
differences from Kafka: the replication factor is validated (≥ 1) and stored, but one
broker holds one copy; there are no ACLs or quotas. Transactions: :mod:`kafkasim.broker.txn_api`; producer state (DescribeProducers, WriteTxnMarkers):
:mod:`kafkasim.broker.producers_api`.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional

from kafkasim.clock import Clock

from kafkasim.broker.admin import MAX_PARTITIONS, TopicAdmin, topic_id_rng  # noqa: F401  (re-exported)
from kafkasim.broker.core import INTERNAL_TOPICS
from kafkasim.broker.consumer_group_api import ConsumerGroupApi
from kafkasim.broker.data import (
    EARLIEST, LATEST, MAX_TIMESTAMP, ColumnFetchResult, DataPlane, FetchResult, ProduceResult,
)
from kafkasim.broker.elections import Elections
from kafkasim.broker.group_api import GroupApi
from kafkasim.broker.lifecycle import Lifecycle
from kafkasim.broker.log_dirs import LogDirFaults
from kafkasim.broker.producers_api import ProducersApi
from kafkasim.broker.reassignments import PartitionReassignments
from kafkasim.broker.share_group_api import ShareGroupApi
from kafkasim.broker.txn_api import TxnApi

__all__ = ["Broker", "ProduceResult", "FetchResult", "ColumnFetchResult", "EARLIEST", "LATEST", "MAX_TIMESTAMP",
           "INTERNAL_TOPICS"]


class Broker(Lifecycle, TopicAdmin, DataPlane, GroupApi, ConsumerGroupApi, ShareGroupApi, TxnApi, ProducersApi, Elections,
             PartitionReassignments, LogDirFaults):
    """An in-process Kafka broker over ``data_dir`` (see the module docstring).

    ``default_configs`` are topic config defaults (Kafka's topic names, e.g.
    ``{"retention.ms": "3600000"}``); ``broker_configs`` are broker configs
    (server.properties names: ``log.cleaner.enable``, ``log.retention.check.interval.ms``;
    :data:`kafkasim.config.BROKER_CONFIGS`). ``topic_id_seed`` (kafkasim only): new topics'
    ids are drawn from ``random.Random(topic_id_seed)`` instead of a random UUID, so a seeded
    simulation whose outcome depends on topic ids (KIP-848's server assignors order topics by
    id) is reproducible.

    Example::

        >>> b = Broker("/tmp/kafkasim-doc")                      # doctest: +SKIP
        >>> b.create_topic("orders", partitions=3, configs={"retention.ms": "3600000"})
        >>> b.produce("orders", 0, encode_batch(0, [(0, 1000, b"k", b"v", ())])).base_offset
        0
    """

    def __init__(self, data_dir: str | os.PathLike, *, clock: Optional[Clock] = None,
                 broker_id: int = 0, default_configs: Optional[Mapping[str, Any]] = None,
                 broker_configs: Optional[Mapping[str, Any]] = None,
                 topic_id_seed: Optional[int | str] = None) -> None:
        rng = topic_id_rng(topic_id_seed)      # checked before anything touches the disk
        self._open(data_dir, clock, broker_id, default_configs, broker_configs)
        self._topic_id_rng = rng
