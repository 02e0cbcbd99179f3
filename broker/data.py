"""The broker's data plane: produce, fetch, list offsets, producer ids.

:class:`DataPlane` is one of the parts of :class:`kafkasim.broker.broker.Broker` (state and
lookups in :class:`~kafkasim.broker.core.BrokerCore`): Kafka's Produce, Fetch,
ListOffsets and InitProducerId, as calls, plus the result types they return.

Invariants:
- Offsets in a partition are contiguous; the broker stamps a batch's base offset.
- An idempotent producer's retried batch is never written twice: under the partition's
  produce lock the batch is checked against the producer state
  (:mod:`kafkasim.broker.producer_state`) and a duplicate returns the original offset.
- Producer ids are handed out from blocks whose end is persisted before the first id of
  the block is used, so a restarted broker never reuses an id.

Thread-safety: produce takes the partition's lock around the idempotence check and the
append; fetch and list_offsets go straight to the Log, which guards itself. These are
the hot paths: no broker-wide lock is taken (a closed broker has no partitions, so the
lookup fails and :meth:`~kafkasim.broker.core.BrokerCore._partition` raises
:class:`~kafkasim.errors.BrokerNotAvailableError`).
"""

from __future__ import annotations

from bisect import bisect_left
from typing import NamedTuple, Optional

from kafkasim.arguments import check_arg
from kafkasim.errors import (
    FencedLeaderEpochError, InvalidRequiredAcksError, NotLeaderOrFollowerError, UnknownLeaderEpochError,
)
from kafkasim.records import record_batch as rb
from kafkasim.records.framing import ATTR_TRANSACTIONAL, BatchHeader
from kafkasim.records.validation import check_records
from kafkasim.storage.epoch_cache import UNDEFINED_EPOCH
from kafkasim.storage.log import Log, RecordColumns
from kafkasim.types import Record, TopicPartition

from kafkasim.broker.core import BrokerCore

__all__ = ["DataPlane", "ProduceResult", "FetchResult", "ColumnFetchResult", "BatchFetchResult", "EARLIEST",
           "LATEST", "MAX_TIMESTAMP"]

EARLIEST = -2
"""``list_offsets`` timestamp meaning the log start offset (Kafka's ListOffsets -2)."""
LATEST = -1
"""``list_offsets`` timestamp meaning the log end offset (Kafka's ListOffsets -1)."""
MAX_TIMESTAMP = -3
"""``list_offsets`` timestamp meaning the record with the largest timestamp (Kafka's ListOffsets
-3, KIP-734): its offset (the first such on ties) and timestamp."""
_PRODUCER_ID_BLOCK = 1000
_PRODUCER_FIELDS = ("producer_id", "producer_epoch", "base_sequence")


class ProduceResult(NamedTuple):
    """Outcome of one produce: where the batch landed."""

    base_offset: int
    log_append_time: int   # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    duplicate: bool = False  # an idempotent retry: nothing was written


class FetchResult(NamedTuple):
    """Records from one partition plus the partition's offsets at fetch time, and
    ``next_offset``: where the next fetch starts (one past the last batch read, so past a
    compaction gap even when it leaves no record to return: Kafka's consumer takes its next
    fetch offset from the batches, not the records)."""

    records: list[Record]
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    next_offset: int = -1


class ColumnFetchResult(NamedTuple):
    """:class:`FetchResult` with the records column-wise (:meth:`Broker.fetch_columns`)."""

    columns: RecordColumns
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    next_offset: int = -1


class BatchFetchResult(NamedTuple):
    """:meth:`DataPlane.fetch_batches`: the stored batches as they are (headers and bytes,
    CRC-checked), below the high watermark, and the partition's offsets at fetch time."""

    batches: list[tuple[BatchHeader, bytes]]
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int = -1
    aborted_transactions: Optional[list] = None   # read_committed: [AbortedTxn] in the range read


class DataPlane(BrokerCore):
    """Produce / fetch / list offsets / init producer id (see the module docstring)."""

    _next_producer_id: int
    _producer_id_limit: int

    def produce(self, topic: str, partition: int, batch: bytes, acks: int | str = 1, *,
                node: Optional[int] = None) -> ProduceResult:
        """Append one encoded batch (kafkasim.records.record_batch.encode_batch) to a partition.

        The broker verifies the batch, applies the idempotent-producer rules and stamps
        the base offset. ``acks`` is validated as Kafka does (0, 1, -1 or 'all'); the
        replication rules (``min.insync.replicas``, waiting for the ISR on ``acks=all``) are
        :mod:`kafkasim.broker.replica`'s; with one replica every accepted batch is in the
        log and below the high watermark when this returns. ``node``: the broker the client
        sent to, which must lead the partition (NotLeaderOrFollowerError).
        """
        if isinstance(acks, bool) or acks not in (0, 1, -1, "all", "0", "1", "-1"):
            raise InvalidRequiredAcksError(f"acks must be 0, 1, -1 or 'all', got {acks!r}")
        required = -1 if acks == "all" else int(acks)
        part = self._checked_partition(topic, partition)
        if type(batch) is not bytes:
            check_arg("batch", batch, "bytes", what="bytes (an encoded record batch)")
        # the header is needed for the idempotence check; the log verifies the CRC and records
        header = rb.decode_header(batch, 0, where=f"produce to {topic}-{partition}")
        if node is not None:
            self._check_node(node)
        if self._offline_log_dirs:
            self._check_log_dir(part, node)
        in_txn = header.attributes & ATTR_TRANSACTIONAL and self._verify_transactional(header, topic, partition)
        with part.lock:
            log = part.leader_log(node)
            if header.producer_id >= 0:
                table = part.producer_table()
                original = table.check(header)
                if original is not None:
                    return ProduceResult(original, -1, log.log_start_offset, True)

                def append(b: bytes, epoch: int):
                    written = log.append_batch(b, partition_leader_epoch=epoch, in_transaction=in_txn)
                    table.update(written)   # before any acks=all wait: a retry is then a duplicate
                    return written
            else:
                def append(b: bytes, epoch: int):
                    return log.append_batch(b, partition_leader_epoch=epoch, in_transaction=in_txn)
            written = part.append_as_leader(batch, header, required, log.config.min_insync_replicas, append)
        append_time = (written.max_timestamp if written.attributes & rb.ATTR_TIMESTAMP_TYPE_LOG_APPEND
                       else -1)
        return ProduceResult(written.base_offset, append_time, log.log_start_offset, False)

    def append_records(self, topic: str, partition: int, records, **producer) -> ProduceResult:
        """Convenience: encode ``records`` — ``(timestamp, key, value, headers)`` tuples — as
        one batch and produce it. ``producer`` may give producer_id/producer_epoch/base_sequence.

        Every record is checked first by the one record rule
        (:func:`kafkasim.records.validation.check_records`): a timestamp outside
        [0, 2**63-1] is an InvalidTimestampError, a key, value or header of the wrong type an
        InvalidRecordError naming the record and the field; nothing is written then."""
        self._checked_partition(topic, partition)
        for name, value in producer.items():
            if name not in _PRODUCER_FIELDS:
                raise TypeError(f"append_records() got an unexpected keyword argument {name!r}")
            check_arg(name, value, "int")
        recs = [(i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(check_records(records))]
        return self.produce(topic, partition, rb.encode_batch(0, recs, **producer))

    def init_producer_id(self) -> tuple[int, int]:
        """Allocate a new producer id (epoch 0) for an idempotent producer.

        Ids are handed out from blocks of 1000 whose start is persisted first, so a
        restarted broker never reuses an id.
        """
        with self._lock:
            self._check_open()
            if self._next_producer_id >= self._producer_id_limit:
                self._producer_id_limit = self._next_producer_id + _PRODUCER_ID_BLOCK
                self._meta.save_next_producer_id(self._producer_id_limit)
            pid = self._next_producer_id
            self._next_producer_id += 1
            return pid, 0

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int = 1_048_576, *,
              node: Optional[int] = None) -> FetchResult:
        """Records of one partition from ``offset`` (at least one batch, up to ``max_bytes``),
        only those below the high watermark (none when ``offset`` is at or past it).

        OffsetOutOfRangeError when ``offset`` is below the log start or above the log end.
        Compaction gaps are stepped over (``Log.fetch``): no records means none lie in
        ``[offset, log end)``. ``node``: the broker asked (the leader, or with KIP-392 a
        follower hosting a replica; NotLeaderOrFollowerError otherwise).
        """
        part = self._checked_partition(topic, partition)
        log = self._read_log(part, node)
        check_arg("offset", offset, "int")
        check_arg("max_bytes", max_bytes, "int", min=0)
        hw = min(part.high_watermark, log.log_end_offset)
        records, next_offset = log.fetch(offset, max_bytes)
        if next_offset > hw:
            records = [r for r in records if r.offset < hw]
            next_offset = max(offset, hw)
        return FetchResult(records, hw, log.log_start_offset, log.log_end_offset, next_offset)

    def fetch_columns(self, topic: str, partition: int, offset: int,
                      max_bytes: int = 1_048_576, *, node: Optional[int] = None) -> ColumnFetchResult:
        """:meth:`fetch` column-wise: the same records, same rules and errors, as a
        :class:`kafkasim.storage.log.RecordColumns` (offsets, timestamps, keys, values, headers
        lists; no producer fields). The consumer's fetcher uses it to build each
        ``ConsumerRecord`` directly, in C-level loops."""
        part = self._checked_partition(topic, partition)
        log = self._read_log(part, node)
        check_arg("offset", offset, "int")
        check_arg("max_bytes", max_bytes, "int", min=0)
        hw = min(part.high_watermark, log.log_end_offset)
        columns, next_offset = log.fetch(offset, max_bytes, columns=True)
        if next_offset > hw:
            n = bisect_left(columns.offsets, hw)
            columns = RecordColumns(*(col[:n] for col in columns))
            next_offset = max(offset, hw)
        return ColumnFetchResult(columns, hw, log.log_start_offset, log.log_end_offset, next_offset)

    def fetch_batches(self, topic: str, partition: int, offset: int, max_bytes: int = 1_048_576, *,
                      node: Optional[int] = None, isolation_level: int = 0) -> BatchFetchResult:
        """:meth:`fetch` as stored batches, not records: whole batches from the one holding
        ``offset`` (at least one, up to ``max_bytes``), each with its header as the leader
        wrote it (base offset, partition leader epoch, producer fields, timestamps), as
        Kafka's fetch returns them. Batches from ``offset`` on, below the high watermark
        (``isolation_level`` 0, read_uncommitted) or the last stable offset (1,
        read_committed: then ``aborted_transactions`` lists the aborted transactions the
        range read overlaps, from the ``.txnindex`` files, as Kafka's Fetch does); a batch
        holding no record (compaction) is stepped over. Same errors as :meth:`fetch`."""
        part = self._checked_partition(topic, partition)
        log = self._read_log(part, node)
        check_arg("offset", offset, "int")
        check_arg("max_bytes", max_bytes, "int", min=0)
        hw = min(part.high_watermark, log.log_end_offset)
        lso = self._lso(log, hw)
        bound = lso if isolation_level == 1 else hw
        out: list[tuple[BatchHeader, bytes]] = []
        at = offset
        while True:
            read = log.read_batches(at, max_bytes)     # OffsetOutOfRangeError outside the log
            if at >= bound or not read:
                break
            for h, raw in read:
                if h.base_offset >= bound:
                    break
                if h.record_count:
                    out.append((h, raw))
            if out or read[-1][0].next_offset >= bound:
                break
            at = read[-1][0].next_offset               # only empty batches: a compaction gap
        aborted = None
        if isolation_level == 1:
            upper = out[-1][0].next_offset if out else bound
            aborted = log.collect_aborted_txns(offset, upper) if out else []
        return BatchFetchResult(out, hw, log.log_start_offset, log.log_end_offset, lso, aborted)

    @staticmethod
    def _lso(log: Log, hw: int) -> int:
        """Kafka's last stable offset: the first offset of the earliest open transaction,
        bounded by the high watermark ``hw`` (``hw`` itself when none is open)."""
        unstable = log.first_unstable_offset
        return hw if unstable is None else min(unstable, hw)

    def last_stable_offset(self, topic: str, partition: int, *, node: Optional[int] = None) -> int:
        """The partition's last stable offset (LSO): what a read_committed consumer may read
        up to, and what ListOffsets LATEST answers it; the high watermark when no
        transaction is open on the partition."""
        part = self._checked_partition(topic, partition)
        log = self._read_log(part, node)
        return self._lso(log, min(part.high_watermark, log.log_end_offset))

    def check_replica_online(self, topic: str, partition: int, node: Optional[int] = None) -> None:
        """KafkaStorageError when broker ``node`` (None: the partition's leader, the one broker)
        holds its replica of the partition in an offline log directory (disk full), as Kafka's
        ``ReplicaManager`` answers for ``HostedPartition.Offline``; nothing otherwise. The
        server asks it before the leadership check, so that error comes first, as in Kafka."""
        if self._offline_log_dirs:
            self._check_log_dir(self._checked_partition(topic, partition), node)

    def leader_epoch(self, topic: str, partition: int) -> int:
        """The partition's current leader epoch (what Metadata reports; 0 for one broker)."""
        return self._checked_partition(topic, partition).leader_epoch

    def check_leader_epoch(self, topic: str, partition: int, current_leader_epoch: int, *,
                           node: Optional[int] = None) -> int:
        """Kafka's ``checkCurrentLeaderEpoch`` for a request carrying the leader epoch its
        client knows (-1: none, no check): FencedLeaderEpochError when it is older than the
        partition's, UnknownLeaderEpochError when newer. Skipped when ``node`` (a cluster's
        broker) holds no replica of the partition: that broker answers NOT_LEADER_OR_FOLLOWER
        instead, as Kafka's does. Returns the partition's leader epoch."""
        part = self._checked_partition(topic, partition)
        epoch = part.leader_epoch
        if current_leader_epoch < 0 or (node is not None and node not in part.hosted):
            return epoch
        if current_leader_epoch < epoch:
            raise FencedLeaderEpochError(f"{part.name}: the request's leader epoch {current_leader_epoch} is "
                                         f"older than the current leader epoch {epoch}")
        if current_leader_epoch > epoch:
            raise UnknownLeaderEpochError(f"{part.name}: the request's leader epoch {current_leader_epoch} is "
                                          f"newer than the current leader epoch {epoch}")
        return epoch

    def offset_for_leader_epoch(self, topic: str, partition: int, leader_epoch: int, *,
                                current_leader_epoch: int = -1, node: Optional[int] = None) -> tuple[int, int]:
        """Kafka's OffsetForLeaderEpoch on the partition's leader: ``(epoch, end offset)`` —
        the largest epoch ≤ ``leader_epoch`` the leader's log knows and where it ends (the
        start of the next higher epoch, or the log end offset when it is the current one);
        ``(-1, -1)`` when it knows none (``LeaderEpochCache.end_offset_for``). First the
        ``current_leader_epoch`` check (:meth:`check_leader_epoch`), then NotLeaderOrFollowerError
        unless ``node`` (None: the one broker) leads the partition."""
        part = self._checked_partition(topic, partition)
        if node is not None:
            self._check_node(node)
            if node not in part.hosted:
                raise NotLeaderOrFollowerError(f"broker {node} is not a replica of {part.name} "
                                               f"(replicas {part.replicas})")
        self.check_leader_epoch(topic, partition, current_leader_epoch, node=node)
        if part.leader < 0 or (node is not None and node != part.leader):
            raise NotLeaderOrFollowerError(f"broker {node} is not the leader of {part.name} "
                                           f"(leader: {part.leader}, epoch {part.leader_epoch})")
        leader = part.hosted[part.leader]
        return leader.epochs.end_offset_for(leader_epoch, leader.log.log_end_offset)

    def offset_leader_epoch(self, topic: str, partition: int, timestamp: int, offset: int) -> int:
        """The leader epoch ListOffsets reports with the offset :meth:`list_offsets` found for
        ``timestamp``, as Kafka's: LATEST → the partition's current leader epoch; EARLIEST →
        the epoch of the first epoch-cache entry if it starts at or before the log start
        offset, else -1; a timestamp → the epoch of the batch holding ``offset`` (-1 when
        ``offset`` is -1, nothing found)."""
        part = self._checked_partition(topic, partition)
        if timestamp == LATEST:
            return part.leader_epoch
        if offset < 0 or part.leader < 0:
            return UNDEFINED_EPOCH
        leader = part.hosted[part.leader]
        if timestamp == EARLIEST:
            entries = leader.epochs.entries
            return entries[0][0] if entries and entries[0][1] <= leader.log.log_start_offset else UNDEFINED_EPOCH
        return leader.epochs.epoch_for_offset(offset)

    def _read_log(self, part, node: Optional[int]) -> Log:
        if node is not None:
            self._check_node(node)
        if self._offline_log_dirs:
            self._check_log_dir(part, node)
        if node is None or node == part.leader:
            return part.leader_log(node)
        replica = part.hosted.get(node)
        if replica is None or node not in part.replicas:
            raise NotLeaderOrFollowerError(f"broker {node} is not a replica of {part.name} "
                                           f"(replicas {part.replicas})")
        part.leader_log()    # a follower serves reads only while the partition has a leader
        return replica.log

    def list_offsets(self, topic: str, partition: int, timestamp: int, *,
                     isolation_level: int = 0) -> tuple[int, int]:
        """Kafka's ListOffsets: ``EARLIEST`` (-2) → (log start, -1); ``LATEST`` (-1) →
        (the last fetchable offset, -1); ``MAX_TIMESTAMP`` (-3) → (first offset with the
        largest timestamp, that timestamp); a timestamp ≥ 0 → (first offset whose timestamp ≥
        it, its timestamp). The last fetchable offset is the high watermark, or under
        read_committed (``isolation_level`` 1) the last stable offset; (-1, -1) when there is
        none, or when what was found is not below the last fetchable offset yet (as Kafka's
        ``Partition.fetchOffsetForTimestamp``)."""
        part = self._checked_partition(topic, partition)
        if self._offline_log_dirs:
            self._check_log_dir(part, None)
        log = part.leader_log()
        check_arg("timestamp", timestamp, "int", min=MAX_TIMESTAMP,
                  what="-3 (max timestamp), -2 (earliest), -1 (latest) or a timestamp >= 0, an int")
        check_arg("isolation_level", isolation_level, "int", min=0, max=1,
                  what="0 (read_uncommitted) or 1 (read_committed)")
        if timestamp == EARLIEST:
            return log.log_start_offset, -1
        fetchable = part.high_watermark
        if isolation_level == 1:
            fetchable = self._lso(log, min(fetchable, log.log_end_offset))
        if timestamp == LATEST:
            return fetchable, -1                # what a consumer can read up to
        found = log.max_timestamp_and_offset() if timestamp == MAX_TIMESTAMP else log.offset_for_time(timestamp)
        return found if found is not None and found[0] < fetchable else (-1, -1)

    def log(self, topic: str, partition: int) -> Log:
        """The partition leader's Log, for in-process components (e.g. the group coordinator)."""
        return self._checked_partition(topic, partition).leader_log()

    def _checked_partition(self, topic: str, partition: int):
        """The partition, after checking the arguments' types (kafkasim.arguments)."""
        if type(topic) is not str:
            check_arg("topic", topic, "str")
        if type(partition) is not int:
            check_arg("partition", partition, "int")
        return self._partition(topic, partition)

    def leader_for(self, topic: str, partition: int) -> int:
        """The partition's leader (a broker id; -1 while offline): the metadata a client asks
        for before it sends. The one broker leads every partition."""
        return self._checked_partition(topic, partition).leader

    def partitions(self) -> list[TopicPartition]:
        """Every partition the broker hosts, sorted."""
        with self._lock:
            self._check_open()
            return sorted(self._partitions)
