"""Topic administration of the broker: create, list, describe, delete, add partitions, alter configs.

:class:`TopicAdmin` is one of the parts of :class:`kafkasim.broker.broker.Broker` (state and
lookups in :class:`~kafkasim.broker.core.BrokerCore`). Kafka's CreateTopics, DeleteTopics,
CreatePartitions, DescribeTopics/DescribeConfigs, IncrementalAlterConfigs and DeleteRecords,
as calls.

Invariants:
- Validation happens before anything touches the disk: a bad name, partition count,
  replication factor or config raises and leaves nothing behind (a partition dir
  opened for a topic whose metadata write then fails is removed again). The rules are
  those of :mod:`kafkasim.broker.metadata`, which a broker also applies to every
  metadata file it loads.
- A topic exists iff its metadata file exists: create writes the metadata last, delete
  removes it first, so a crash midway leaves either the whole topic or no topic (and
  ``-delete`` directories the next open removes).
- Partitions only grow; each growth appends to the topic's ``partition_history`` the old
  and new counts, the broker clock's time and every old partition's log end offset (the
  offset from which it holds records written under the new count), saved in the same
  atomic metadata write. Configs are stored as the overrides given, canonicalised.
- Every call on a closed broker raises :class:`~kafkasim.errors.BrokerNotAvailableError`.

Thread-safety: every method runs under the broker's metadata lock.
"""

from __future__ import annotations

import random
import uuid
from typing import Any, Mapping, Optional

from kafkasim.arguments import bad_arg, check_arg
from kafkasim.config import MAX_PARTITIONS, LogConfig
from kafkasim.errors import (
    InvalidConfigurationError, InvalidPartitionsError, InvalidTopicError, OffsetOutOfRangeError,
    PolicyViolationError, TopicAlreadyExistsError, UnknownTopicOrPartitionError,
)
from kafkasim.storage.layout import validate_topic
from kafkasim.storage.partition_history import history_entry
from kafkasim.types import TopicPartition

from kafkasim.broker.core import INTERNAL_TOPICS, BrokerCore
from kafkasim.broker.metadata import (
    TopicMetadata, check_partition_count, check_replication_factor, check_topic_configs,
)

__all__ = ["TopicAdmin", "MAX_PARTITIONS"]


def topic_id_rng(seed: Optional[int | str]) -> Optional[random.Random]:
    """The source of new topics' ids for ``Broker(topic_id_seed=seed)``: None (random UUIDs,
    as Kafka) or ``random.Random(seed)`` (kafkasim only: a seeded simulation gets the same
    topic ids, in the same order, on every run). A seed of another type: InvalidArgumentError."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, (int, str)):
        raise bad_arg("topic_id_seed", seed, "an int or a str")
    return random.Random(seed)


class TopicAdmin(BrokerCore):
    """Create/list/describe/delete topics, add partitions, alter configs (see the module docstring)."""

    _topic_id_rng: Optional[random.Random] = None      # None: random UUIDs, as Kafka

    def _new_topic_id(self) -> str:
        rng = self._topic_id_rng
        return (uuid.UUID(int=rng.getrandbits(128), version=4) if rng is not None else uuid.uuid4()).hex

    def auto_create_topic(self, name: str) -> int:
        """The partition count of ``name``, creating the topic first when it is missing and
        ``auto.create.topics.enable`` is true (``num.partitions`` partitions,
        ``default.replication.factor`` replicas), as Kafka answers a client's metadata request
        that allows auto-creation. Disabled: UnknownTopicOrPartitionError naming the config.
        A topic another caller creates meanwhile is simply used."""
        try:
            return self.partition_count(name)
        except UnknownTopicOrPartitionError:
            if not self.broker_config["auto.create.topics.enable"]:
                raise UnknownTopicOrPartitionError(
                    f"Unknown topic {name!r} (auto.create.topics.enable=false: create it first, e.g. "
                    f"`kafkasim topics create {name}`)") from None
        try:
            self.create_topic(name, self.broker_config["num.partitions"],
                              self.broker_config["default.replication.factor"])
        except TopicAlreadyExistsError:
            pass
        return self.partition_count(name)

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     configs: Optional[Mapping[str, Any]] = None) -> dict:
        """Create a topic; returns its description. Raises InvalidTopicError,
        TopicAlreadyExistsError, InvalidPartitionsError, InvalidReplicationFactorError or
        InvalidConfigurationError before writing anything."""
        validate_topic(name)
        check_partition_count(partitions)
        check_replication_factor(replication_factor)
        config, canonical = check_topic_configs({} if configs is None else configs, self.default_config)
        with self._lock:
            self._check_open()
            if name in self._topics:
                raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
            collides = [t for t in self._topics if t.replace(".", "_") == name.replace(".", "_")]
            if collides:
                raise InvalidTopicError(
                    f"Topic '{name}' collides with existing topic: {collides[0]} "
                    "(topics that differ only in '.' vs '_' collide in Kafka's metric names)")
            meta = TopicMetadata(name=name, topic_id=self._new_topic_id(), partitions=partitions,
                                 replication_factor=replication_factor, configs=canonical,
                                 created_ms=self.clock.now_ms())
            opened = []
            try:
                for p in range(partitions):
                    self._discard_stale_dir(name, p)
                    opened.append(self._open_partition(name, p, config))
                self._meta.save_topic(meta)
            except BaseException:
                for tp in opened:
                    self._drop_partition(tp)
                raise
            self._topics[name] = meta
            return self._describe(meta)

    def list_topics(self, include_internal: bool = False) -> list[str]:
        """Names of all topics, sorted; internal ones (``__consumer_offsets``) only on request."""
        with self._lock:
            self._check_open()
            return sorted(t for t in self._topics if include_internal or t not in INTERNAL_TOPICS)

    def describe_topic(self, name: str) -> dict:
        """Topic id, configs (overrides), replication factor, per-partition offsets and sizes, and
        the ``partition_history`` (one entry per growth of the partition count)."""
        with self._lock:
            self._check_open()
            return self._describe(self._topic(name))

    def delete_topic(self, name: str) -> None:
        """Delete a topic and all its data. The metadata goes first, so a crash midway
        leaves no topic, only ``-delete`` directories that the next open removes."""
        with self._lock:
            self._check_open()
            meta = self._topic(name)
            self._meta.delete_topic(meta)
            del self._topics[name]
            for p in range(meta.partitions):
                self._drop_partition(TopicPartition(name, p))

    def create_partitions(self, name: str, total_count: int) -> dict:
        """Grow a topic to ``total_count`` partitions (Kafka's CreatePartitions; forward only)."""
        with self._lock:
            self._check_open()
            meta = self._topic(name)
            check_partition_count(total_count, "total_count")
            if total_count == meta.partitions:
                raise InvalidPartitionsError(f"Topic already has {meta.partitions} partitions.")
            if total_count < meta.partitions:
                raise InvalidPartitionsError(
                    f"Topic currently has {meta.partitions} partitions, which is higher than "
                    f"the requested {total_count}.")
            config = self._config_of(meta)
            change = history_entry(meta.partitions, total_count, self.clock.now_ms(),
                                   [self._log_of(TopicPartition(name, p)).log_end_offset
                                    for p in range(meta.partitions)])
            opened = []
            try:
                for p in range(meta.partitions, total_count):
                    self._discard_stale_dir(name, p)
                    opened.append(self._open_partition(name, p, config))
                grown = TopicMetadata(**{**meta.__dict__, "partitions": total_count,
                                         "partition_history": [*meta.partition_history, change]})
                self._meta.save_topic(grown)
            except BaseException:
                for tp in opened:
                    self._drop_partition(tp)
                raise
            self._topics[name] = grown
            return self._describe(grown)

    def alter_topic_configs(self, name: str, configs: Mapping[str, Any]) -> dict:
        """Set config overrides (Kafka's incremental AlterConfigs SET); a value of None
        removes the override (DELETE)."""
        check_arg("configs", configs, "mapping", what="a mapping of config names to values (None removes one)")
        with self._lock:
            self._check_open()
            meta = self._topic(name)
            merged = {**meta.configs, **{k: v for k, v in configs.items() if v is not None}}
            for k, v in configs.items():
                if v is None:
                    if k not in meta.configs and k not in self.default_config.to_kafka():
                        raise InvalidConfigurationError(f"Unknown topic config name: {k}")
                    merged.pop(k, None)
            config = self.default_config.with_overrides(merged)
            canonical = {k: config.to_kafka()[k] for k in merged}
            updated = TopicMetadata(**{**meta.__dict__, "configs": canonical})
            self._meta.save_topic(updated)
            self._topics[name] = updated
            for p in range(meta.partitions):
                for log in self._partitions[TopicPartition(name, p)].logs():
                    log.update_config(config)
            return self._describe(updated)

    def delete_records(self, topic: str, partition: int, offset: int, *, node: Optional[int] = None) -> int:
        """Kafka's DeleteRecords for one partition: records below ``offset`` (-1: the high
        watermark) are deleted: the log start offset (low watermark) moves up to it, on the
        leader and every reachable follower, persisted before it takes effect (a restart keeps
        it); segments wholly below it go at the next retention pass. Returns the new low
        watermark. Errors as Kafka's ``ReplicaManager.deleteRecords``: an internal topic →
        InvalidTopicError; a topic without ``delete`` in ``cleanup.policy`` →
        PolicyViolationError; an offset below -1 or above the high watermark →
        OffsetOutOfRangeError; ``node`` (the broker asked) not leading → NotLeaderOrFollowerError.
        An offset at or below the current log start changes nothing."""
        check_arg("offset", offset, "int")
        part = self._checked_partition(topic, partition)
        if topic in INTERNAL_TOPICS:
            raise InvalidTopicError(f"Cannot delete records of internal topic {topic}")
        if node is not None:
            self._check_node(node)
        with part.lock:
            log = part.leader_log(node)
            if not log.config.delete:
                raise PolicyViolationError(f"Records of partition {topic}-{partition} can not be deleted "
                                           f"due to the configured policy (cleanup.policy={log.config.cleanup_policy})")
            target = part.high_watermark if offset == -1 else offset
            if target < 0:
                raise OffsetOutOfRangeError(f"The offset {offset} for partition {topic}-{partition} is not valid")
            return part.delete_records_before(target)

    def partition_count(self, topic: str) -> int:
        """Number of partitions of ``topic``; UnknownTopicOrPartitionError if there is no such topic."""
        with self._lock:
            self._check_open()
            return self._topic(topic).partitions

    def topic_config(self, topic: str) -> LogConfig:
        """The effective config (defaults + overrides) of ``topic``."""
        with self._lock:
            self._check_open()
            return self._config_of(self._topic(topic))

    def _log_of(self, tp: TopicPartition):
        part = self._partitions[tp]
        return part.log if part.log is not None else part.best_log()

    def _describe(self, meta: TopicMetadata) -> dict:
        parts = []
        for p in range(meta.partitions):
            part = self._partitions[TopicPartition(meta.name, p)]
            log = self._log_of(TopicPartition(meta.name, p))
            parts.append({
                "partition": p, "leader": part.leader, "replicas": list(part.replicas), "isr": list(part.isr),
                "log_start_offset": log.log_start_offset, "log_end_offset": log.log_end_offset,
                "high_watermark": part.high_watermark, "size_bytes": log.size_in_bytes,
                "segments": len(log.segments),
            })
        return {"name": meta.name, "topic_id": meta.topic_id, "internal": meta.name in INTERNAL_TOPICS,
                "replication_factor": meta.replication_factor, "configs": dict(meta.configs),
                "partitions": parts,
                "partition_history": [{**e, "log_end_offsets": list(e["log_end_offsets"])}
                                      for e in meta.partition_history]}
