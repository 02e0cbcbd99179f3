"""The topic and data calls of :class:`kafkasim.server.remote.RemoteBroker` (Metadata,
CreateTopics, DeleteTopics, CreatePartitions, configs, log dirs, Produce, Fetch,
ListOffsets, InitProducerId), as a mixin over :class:`RemoteConnection`.

Thread-safety: as the connection (one lock serialises the exchanges).
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Mapping, Optional

from kafkasim.errors import (
    IllegalStateError, InvalidArgumentError, InvalidConfigurationError, UnknownTopicOrPartitionError, for_code,
)
from kafkasim.server import codec
from kafkasim.types import TopicPartition
from kafkasim.server.remote_conn import (
    EARLIEST, LATEST, MAX_TIMESTAMP, OP_DELETE, OP_SET, RESOURCE_TOPIC, SOURCE_DYNAMIC_TOPIC, _code, _config_text, _message,
    _raise,
)

__all__ = ["TopicCalls"]


class TopicCalls:
    """Topics, configs and the data plane over the wire (mixin; needs ``_call``)."""

    def flush(self) -> None:
        """No-op: the server flushes its logs by its own policy and when it stops."""

    def tick(self) -> None:
        """No-op: maintenance runs in the server."""
        return None

    def log(self, topic: str, partition: int):
        raise IllegalStateError("Broker.log() is in-process only: the log lives in the server process")

    def run_log_maintenance(self):
        raise IllegalStateError("run_log_maintenance() is in-process only: the server runs its own maintenance")

    # ------------------------------------------------------------------ metadata and topics

    def _metadata(self, names: Optional[list[str]]):
        topics = None if names is None else [{"name": n} for n in names]
        return self._call(3, {"topics": topics, "allow_auto_topic_creation": False})

    def _topic_meta(self, name: str):
        meta = self._metadata([name])
        for t in meta.topics:
            if t.name == name:
                if _code(t.error_code) == UnknownTopicOrPartitionError.errno:
                    raise UnknownTopicOrPartitionError(f"Unknown topic: {name!r}")
                _raise(t.error_code, None, f"topic {name!r}")
                return t
        raise UnknownTopicOrPartitionError(f"Unknown topic: {name!r}")

    def auto_create_topic(self, name: str) -> int:
        """Metadata for ``name`` allowing auto-creation: its partition count, the server
        creating it when its ``auto.create.topics.enable`` says so (else UNKNOWN_TOPIC_OR_PARTITION)."""
        meta = self._call(3, {"topics": [{"name": name}], "allow_auto_topic_creation": True})
        for t in meta.topics:
            if t.name == name:
                if _code(t.error_code) == UnknownTopicOrPartitionError.errno:
                    raise UnknownTopicOrPartitionError(
                        f"Unknown topic {name!r} (the server does not auto-create topics: "
                        f"auto.create.topics.enable=false)")
                _raise(t.error_code, None, f"topic {name!r}")
                return len(t.partitions)
        raise UnknownTopicOrPartitionError(f"Unknown topic: {name!r}")

    def list_topics(self, include_internal: bool = False) -> list[str]:
        meta = self._metadata(None)
        return sorted(t.name for t in meta.topics
                      if not _code(t.error_code) and (include_internal or not t.is_internal))

    def partition_count(self, topic: str) -> int:
        return len(self._topic_meta(topic).partitions)

    def partitions(self) -> list[TopicPartition]:
        meta = self._metadata(None)
        return sorted(TopicPartition(t.name, p.partition_index) for t in meta.topics
                      if not _code(t.error_code) for p in t.partitions)

    def _config_rows(self, name: str):
        answer = self._call(32, {"resources": [{"resource_type": RESOURCE_TOPIC, "resource_name": name,
                                                "configuration_keys": None}],
                                 "include_synonyms": False, "include_documentation": False})
        r = answer.results[0]
        if _code(r.error_code) == UnknownTopicOrPartitionError.errno:
            raise UnknownTopicOrPartitionError(f"Unknown topic: {name!r}")
        _raise(r.error_code, r.error_message, f"configs of topic {name!r}")
        return r.configs

    def topic_config(self, topic: str):
        """The effective :class:`~kafkasim.config.LogConfig` of ``topic`` (DescribeConfigs)."""
        from kafkasim.config import LogConfig

        return LogConfig.from_overrides({c.name: c.value for c in self._config_rows(topic)
                                         if c.value is not None})

    def _overrides(self, name: str) -> dict:
        from kafkasim.config import LogConfig

        raw = {c.name: c.value for c in self._config_rows(name)
               if _code(c.config_source) == SOURCE_DYNAMIC_TOPIC and c.value is not None}
        kafka = LogConfig.from_overrides(raw).to_kafka()   # the broker's canonical values
        return {k: kafka.get(k, v) for k, v in raw.items()}

    def _log_sizes(self, name: str, partitions: list[int]) -> tuple[Optional[str], dict[int, int]]:
        """``(log dir, {partition: bytes})`` from DescribeLogDirs (``(None, {})`` if not served)."""
        if 35 not in self._versions:
            return None, {}
        answer = self._call(35, {"topics": [{"topic": name, "partitions": partitions}]})
        sizes: dict[int, int] = {}
        log_dir = None
        for result in answer.results:
            if _code(result.error_code):
                continue
            log_dir = result.log_dir
            for t in result.topics:
                if t.name == name:
                    for p in t.partitions:
                        sizes[p.partition_index] = p.partition_size
        return log_dir, sizes

    def describe_topic(self, name: str) -> dict:
        """The embedded broker's description, from Metadata, ListOffsets, DescribeConfigs
        and DescribeLogDirs (see the module docstring for what differs)."""
        from kafkasim.storage.layout import list_segments, partition_dir_name

        t = self._topic_meta(name)
        parts = sorted(t.partitions, key=lambda p: p.partition_index)
        ids = [p.partition_index for p in parts]
        starts = self._list_offsets_many(name, ids, EARLIEST)
        ends = self._list_offsets_many(name, ids, LATEST)
        configs = self._overrides(name)
        log_dir, sizes = self._log_sizes(name, ids)
        out = []
        for p in parts:
            i = p.partition_index
            segments = None
            if log_dir and os.path.isdir(log_dir):
                path = os.path.join(log_dir, partition_dir_name(name, i))
                if not os.path.isdir(path):     # a served cluster: the leader's log directory
                    path = os.path.join(log_dir, f"broker-{p.leader_id}", partition_dir_name(name, i))
                if os.path.isdir(path):
                    segments = len(list_segments(path))
            out.append({"partition": i, "leader": p.leader_id, "replicas": list(p.replica_nodes),
                        "isr": list(p.isr_nodes), "log_start_offset": starts[i][0],
                        "log_end_offset": ends[i][0], "high_watermark": ends[i][0],
                        "size_bytes": sizes.get(i), "segments": segments})
        return {"name": t.name, "topic_id": t.topic_id.hex if t.topic_id else None,
                "internal": bool(t.is_internal),
                "replication_factor": len(parts[0].replica_nodes) if parts else 0,
                "configs": configs, "partitions": out,
                "partition_history": _history_in(log_dir, t.name, len(parts))}

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     configs: Optional[Mapping[str, Any]] = None) -> dict:
        answer = self._call(19, {"topics": [{
            "name": name, "num_partitions": partitions, "replication_factor": replication_factor,
            "assignments": [], "configs": [{"name": k, "value": _config_text(v)}
                                           for k, v in (configs or {}).items()]}],
            "timeout": int(self.timeout_s * 1000), "validate_only": False})
        r = answer.topics[0]
        _raise(r.error_code, r.error_message, f"topic {name!r}")
        return self.describe_topic(name)

    def delete_topic(self, name: str) -> None:
        if self._versions.get(20, 0) >= 6:
            answer = self._call(20, {"topics": [{"name": name, "topic_id": None}], "timeout": 30_000})
        else:
            answer = self._call(20, {"topic_names": [name], "timeout": 30_000})
        r = answer.responses[0]
        if _code(r.error_code) == UnknownTopicOrPartitionError.errno and not getattr(r, "error_message", None):
            raise UnknownTopicOrPartitionError(f"Unknown topic: {name!r}")
        _raise(r.error_code, getattr(r, "error_message", None), f"topic {name!r}")

    def create_partitions(self, name: str, total_count: int) -> dict:
        answer = self._call(37, {"topics": [{"name": name, "count": total_count, "assignments": None}],
                                 "timeout": 30_000, "validate_only": False})
        r = answer.results[0]
        _raise(r.error_code, r.error_message, f"topic {name!r}")
        return self.describe_topic(name)

    def alter_topic_configs(self, name: str, configs: Mapping[str, Any]) -> dict:
        """Set overrides; a value of None removes one (IncrementalAlterConfigs SET/DELETE)."""
        answer = self._call(44, {"resources": [{
            "resource_type": RESOURCE_TOPIC, "resource_name": name,
            "configs": [{"name": k, "config_operation": OP_DELETE if v is None else OP_SET,
                         "value": None if v is None else _config_text(v)} for k, v in configs.items()]}],
            "validate_only": False})
        r = answer.responses[0]
        _raise(r.error_code, r.error_message, f"topic {name!r}")
        return self.describe_topic(name)

    # ------------------------------------------------------------------ data

    def produce(self, topic: str, partition: int, batch: bytes, acks: int | str = 1):
        """Append one Kafka v2 batch (``record_batch.encode_batch``): its bytes, as given,
        are the records of one Produce request; the server validates them."""
        from kafkasim.broker import ProduceResult
        from kafkasim.errors import InvalidRequiredAcksError

        if acks not in (0, 1, -1, "all", "0", "1", "-1"):
            raise InvalidRequiredAcksError(f"acks must be 0, 1, -1 or 'all', got {acks!r}")
        acks = -1 if acks == "all" else int(acks)
        wire = bytes(batch)
        (answer,) = self._leader_call(topic, [partition], 0, lambda ps: {
            "transactional_id": None, "acks": acks, "timeout": int(self.timeout_s * 1000),
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": wire}]}]},
            expect_response=acks != 0)
        if answer is None:
            return ProduceResult(-1, -1, -1, False)
        p = answer.responses[0].partition_responses[0]
        _raise(p.error_code, getattr(p, "error_message", None), f"produce to {topic}-{partition}")
        append_time = codec.ms(p.log_append_time) if p.log_append_time is not None else -1
        return ProduceResult(p.base_offset, append_time, getattr(p, "log_start_offset", -1), False)

    def append_records(self, topic: str, partition: int, records, **producer):
        from kafkasim.records import record_batch as rb

        recs = [(i, ts, k, v, h or ()) for i, (ts, k, v, h) in enumerate(records)]
        return self.produce(topic, partition, rb.encode_batch(0, recs, **producer))

    def init_producer_id(self) -> tuple[int, int]:
        answer = self._call(22, {"transactional_id": None, "transaction_timeout": 60_000,
                                 "producer_id": -1, "producer_epoch": -1})
        _raise(answer.error_code, None, "InitProducerId")
        return answer.producer_id, answer.producer_epoch

    def _fetch_batches(self, topic: str, partition: int, offset: int, max_bytes: int, isolation_level: int = 0,
                       answer_out: Optional[list] = None):
        """One Fetch: ``(records bytes, [(position, header)], high watermark, log start)``,
        the batches as the server stored them (Kafka v2), each CRC-checked; a partial batch at
        the end is left out, as Kafka's clients do. ``answer_out`` gets the partition's answer."""
        from kafkasim.records import framing

        (answer,) = self._leader_call(topic, [partition], 1, lambda ps: {
            "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": max(1, max_bytes),
            "isolation_level": isolation_level, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{
                "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": max(1, max_bytes)}]}],
            "forgotten_topics_data": [], "rack_id": ""})
        _raise(answer.error_code, None, "Fetch")
        p = answer.responses[0].partitions[0]
        code = _code(p.error_code)
        if code:
            from kafkasim.errors import OffsetOutOfRangeError

            if code == OffsetOutOfRangeError.errno:
                raise OffsetOutOfRangeError(
                    f"Fetch offset {offset} is out of range for partition {topic}-{partition} "
                    f"(log start {p.log_start_offset}, log end {p.high_watermark})")
            _raise(code, None, f"{topic}-{partition}")
        if answer_out is not None:
            answer_out.append(p)
        buf = p.records or b""
        batches = framing.BatchIterator(buf, where=f"fetch from {topic}-{partition}")
        found = list(batches)
        if not batches.torn:
            batches.raise_error()
        return buf, found, p.high_watermark, p.log_start_offset

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int = 1_048_576):
        from kafkasim.broker import FetchResult
        from kafkasim.records import record_batch as rb

        buf, batches, hw, start = self._fetch_batches(topic, partition, offset, max_bytes)
        where = f"fetch from {topic}-{partition}"
        records = [r for pos, h in batches for r in rb.iter_records(buf, pos, h, where=where, min_offset=offset)]
        return FetchResult(records, hw, start, hw)

    def fetch_batches(self, topic: str, partition: int, offset: int, max_bytes: int = 1_048_576, *,
                      node: Optional[int] = None, isolation_level: int = 0):
        """Fetch as the stored batches (``(header, bytes)``, control batches included) with the
        last stable offset and, for ``isolation_level`` 1 (read_committed), the aborted
        transactions of the range read: what a read_committed consumer needs. ``node`` is
        accepted for the Protocol; the request goes to the partition's leader."""
        from kafkasim.broker.data import BatchFetchResult
        from kafkasim.storage.txn_index import AbortedTxn

        got: list = []
        buf, batches, hw, start = self._fetch_batches(topic, partition, offset, max_bytes, isolation_level, got)
        p = got[0]
        aborted = None
        if isolation_level == 1:
            aborted = [AbortedTxn(int(a.producer_id), int(a.first_offset), -1, -1)
                       for a in (p.aborted_transactions or ())]
        return BatchFetchResult([(h, bytes(buf[pos:pos + h.size])) for pos, h in batches], hw, start, hw,
                                getattr(p, "last_stable_offset", -1), aborted)

    def fetch_columns(self, topic: str, partition: int, offset: int, max_bytes: int = 1_048_576):
        from kafkasim.broker import ColumnFetchResult
        from kafkasim.records import record_batch as rb
        from kafkasim.storage.fetch import RecordColumns

        buf, batches, hw, start = self._fetch_batches(topic, partition, offset, max_bytes)
        cols = RecordColumns([], [], [], [], [])
        for pos, h in batches:
            deltas, tsds, keys, values, headers = rb.decode_columns(buf, pos, h, where=f"fetch from {topic}-{partition}")
            base, ts0 = h.base_offset, h.base_timestamp
            skip = sum(1 for d in deltas if base + d < offset)
            cols.offsets.extend(base + d for d in deltas[skip:])
            cols.timestamps.extend(ts0 + t for t in tsds[skip:])       # LogAppendTime: the reader's deltas
            cols.keys.extend(keys[skip:])
            cols.values.extend(values[skip:])
            cols.headers.extend(headers[skip:])
        return ColumnFetchResult(cols, hw, start, hw)

    def _list_offsets_many(self, topic: str, partitions: Iterable[int], timestamp: int,
                           isolation_level: int = 0) -> dict:
        partitions = list(partitions)
        if not partitions:
            return {}
        answers = self._leader_call(topic, partitions, 2, lambda ps: {
            "replica_id": -1, "isolation_level": isolation_level, "topics": [{
                "name": topic, "partitions": [{"partition_index": p, "current_leader_epoch": -1,
                                               "timestamp": timestamp} for p in ps]}]})
        out = {}
        for t in (t for answer in answers for t in answer.topics):
            for p in t.partitions:
                if _code(p.error_code) == UnknownTopicOrPartitionError.errno:
                    self._topic_meta(topic)      # the embedded broker's message for a missing topic
                    raise UnknownTopicOrPartitionError(
                        f"This server does not host this topic-partition: {topic}-{p.partition_index}")
                _raise(p.error_code, None, f"{topic}-{p.partition_index}")
                out[p.partition_index] = (p.offset, p.timestamp)
        return out

    def list_offsets(self, topic: str, partition: int, timestamp: int, *,
                     isolation_level: int = 0) -> tuple[int, int]:
        if not isinstance(timestamp, int) or timestamp < MAX_TIMESTAMP:
            raise InvalidConfigurationError(
                f"list_offsets timestamp must be -3 (max timestamp), -2 (earliest), -1 (latest) or >= 0, "
                f"got {timestamp!r}")
        if isolation_level not in (0, 1) or isinstance(isolation_level, bool):
            raise InvalidConfigurationError(
                f"list_offsets isolation_level must be 0 (read_uncommitted) or 1 (read_committed), "
                f"got {isolation_level!r}")
        return self._list_offsets_many(topic, [partition], timestamp, isolation_level)[partition]

    # ------------------------------------------------------------------ groups

    # ------------------------------------------------------------------ partition admin

    def delete_records(self, topic: str, partition: int, offset: int, *, node: Optional[int] = None) -> int:
        """DeleteRecords to the partition's leader; the new low watermark (``node`` is the
        in-process cluster's broker to act as, meaningless over the wire: the leader acts)."""
        def build(ps):
            return {"topics": [{"name": topic, "partitions": [{"partition_index": p, "offset": offset}
                                                            for p in ps]}], "timeout": 30_000}
        for answer in self._leader_call(topic, [partition], 21, build):
            for t in answer.topics:
                for p in t.partitions:
                    _raise(p.error_code, None, f"{topic}-{p.partition_index}")
                    return p.low_watermark
        raise UnknownTopicOrPartitionError(f"Unknown topic: {topic!r}")

    def elect(self, election_type: str = "preferred", partitions=None) -> dict:
        """ElectLeaders (0: preferred, 1: unclean); ``{TopicPartition: None or its error}``."""
        kinds = {"preferred": 0, "unclean": 1}
        if election_type not in kinds:
            raise InvalidArgumentError(f"election_type {election_type!r}: expected 'preferred' or 'unclean'")
        topics = None if partitions is None else [
            {"topic": t, "partitions": ps} for t, ps in _partitions_by_topic(partitions)]
        answer = self._call(43, {"election_type": kinds[election_type], "topic_partitions": topics,
                                 "timeout": 30_000})
        _raise(answer.error_code, None, "ElectLeaders")
        return _partition_results(answer.replica_election_results, "topic", "partition_result", "partition_id")

    def alter_partition_reassignments(self, targets, *, allow_replication_factor_change: bool = True) -> dict:
        """AlterPartitionReassignments: ``{TopicPartition: [broker ids] or None (cancel)}`` →
        ``{TopicPartition: None or its error}``."""
        by_topic: dict[str, list] = {}
        for tp, replicas in sorted(targets.items()):
            by_topic.setdefault(tp[0], []).append(
                {"partition_index": tp[1], "replicas": None if replicas is None else list(replicas)})
        answer = self._call(45, {"timeout": 30_000, "topics": [{"name": t, "partitions": ps}
                                                               for t, ps in by_topic.items()],
                                 "allow_replication_factor_change": allow_replication_factor_change})
        _raise(answer.error_code, answer.error_message, "AlterPartitionReassignments")
        return _partition_results(answer.responses, "name", "partitions", "partition_index")

    def list_partition_reassignments(self, partitions=None) -> dict:
        """ListPartitionReassignments: ``{TopicPartition: {"replicas", "adding_replicas",
        "removing_replicas"}}`` of the reassignments in progress."""
        topics = None if partitions is None else [
            {"name": t, "partition_indexes": ps} for t, ps in _partitions_by_topic(partitions)]
        answer = self._call(46, {"timeout": 30_000, "topics": topics})
        _raise(answer.error_code, answer.error_message, "ListPartitionReassignments")
        return {TopicPartition(t.name, p.partition_index): {
                    "replicas": list(p.replicas), "adding_replicas": list(p.adding_replicas),
                    "removing_replicas": list(p.removing_replicas)}
                for t in answer.topics for p in t.partitions}


def _history_in(log_dir: Optional[str], name: str, partitions: int) -> list[dict]:
    """The topic's partition-count history, read from its metadata file in the served data
    dir (no Kafka API carries it); empty when the data dir is not at hand or never grew."""
    import json

    from kafkasim.storage.layout import META_DIR
    from kafkasim.storage.partition_history import FIELD, check_partition_history

    meta = os.path.join(log_dir, META_DIR, "topics") if log_dir else None
    if not meta or not os.path.isdir(meta):
        return []
    for entry in sorted(os.listdir(meta)):
        if not entry.endswith(".json"):
            continue
        try:
            with open(os.path.join(meta, entry), encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and doc.get("name") == name:
            return [dict(e) for e in check_partition_history(doc.get(FIELD, []), partitions)]
    return []


def _partitions_by_topic(partitions) -> list[tuple[str, list[int]]]:
    """``[(topic, [partition, ...]), ...]`` sorted by topic, partitions in the order given."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp[0], []).append(tp[1])
    return sorted(by_topic.items())


def _partition_results(rows, topic_field: str, list_field: str, partition_field: str) -> dict:
    """Per-partition results (``error_code``/``error_message``) → ``{TopicPartition: None or
    the kafkasim error}``, as the in-process calls return them."""
    out = {}
    for t in rows:
        for p in getattr(t, list_field):
            code = _code(p.error_code)
            tp = TopicPartition(getattr(t, topic_field), getattr(p, partition_field))
            if code:
                cls = for_code(code)
                out[tp] = cls(_message(cls, getattr(p, "error_message", None), f"{tp.topic}-{tp.partition}"))
            else:
                out[tp] = None
    return out
