"""The fetcher: reads records of the fetchable partitions from the broker into poll results.

Each :meth:`Fetcher.fetch` walks the fetchable partitions (assigned, not paused,
position known) round robin, starting after the partition it served last, so no
partition starves; it serves buffered records first and asks the broker for at most
``max_partition_fetch_bytes`` per partition and ``fetch_max_bytes`` per call when a buffer
runs dry. The records become columns, so each record becomes one tuple:

- from a broker with the stored batches (``fetch_batches``: the in-process Broker and
  Cluster), the fetcher decodes each batch (:func:`kafkasim.records.record_batch.decode_columns`,
  as the log's own column read does) and applies the isolation level, as Kafka's clients
  do (txn facts §4.3, :func:`batches_to_columns`): **control batches (transaction markers)
  are never returned**, under either level; ``read_committed`` reads up to the last stable
  offset and drops the batches of aborted transactions by the fetch's aborted list;
- from a broker without them (``kafkasim.server.remote.RemoteBroker``), through
  ``fetch_columns`` (read_uncommitted only).

Invariants:
- records are returned in offset order per partition, each exactly once per
  position: after returning records up to offset ``o`` the position is ``o + 1``;
- a buffer is valid only for the position it was filled at; :meth:`invalidate`
  drops it (seek, reassignment);
- compaction gaps, markers and aborted batches never stall a position: a fetch that
  returns no record moves the position to its ``next_offset`` (the end of the batches it
  read, past the markers), as Kafka's consumer does;
- with a broker or cluster that answers ``leader_for``, each fetch goes to the partition's
  leader, or with ``client_rack`` to the replica the cluster prefers in that rack (KIP-392:
  a follower serves records below the high watermark); a failover
  (NotLeaderOrFollower, LeaderNotAvailable, NetworkError, and KafkaStorage: the replica's log
  directory went offline) drops the cached replica and
  backs off ``retry_backoff_ms`` on the broker's clock;
- a position outside the log (``OffsetOutOfRangeError``, e.g. after retention) goes
  to ``on_out_of_range(tp)``, which resets it by ``auto_offset_reset`` or raises.

Thread-safety: none; owned by one Consumer.
"""

from __future__ import annotations

import gc
from bisect import bisect_left
from itertools import repeat
from typing import Any, Callable, NamedTuple, Optional, Sequence

from kafkasim.consumer.subscription import SubscriptionState
from kafkasim.errors import (
    KafkaStorageError, LeaderNotAvailableError, NetworkError, NotLeaderOrFollowerError, OffsetOutOfRangeError,
)
from kafkasim.records.control import CONTROL_ABORT, read_control_batch
from kafkasim.records.record_batch import ATTR_CONTROL, ATTR_TRANSACTIONAL, extend_columns
from kafkasim.types import TopicPartition

__all__ = ["Fetcher", "ConsumerRecord", "CREATE_TIME", "LOG_APPEND_TIME", "READ_UNCOMMITTED", "READ_COMMITTED",
           "batches_to_columns"]

READ_UNCOMMITTED = 0
READ_COMMITTED = 1

CREATE_TIME = 0
LOG_APPEND_TIME = 1


class ConsumerRecord(NamedTuple):
    """One record as ``poll()`` returns it: kafka-python's ConsumerRecord, its fields in its order.

    ``serialized_key_size``/``serialized_value_size`` are the byte lengths before
    deserialization (-1 for None); ``serialized_header_size`` is the UTF-8 header keys'
    plus the values' bytes (-1 without headers); ``checksum`` is None (v2 batches carry
    no per-record CRC); ``leader_epoch`` is -1: the fetcher reads records column-wise,
    without the batch headers that carry the partition leader epoch (docs/differences.md)."""

    topic: str
    partition: int
    leader_epoch: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any
    value: Any
    headers: Sequence
    checksum: Optional[int]
    serialized_key_size: int
    serialized_value_size: int
    serialized_header_size: int


_tuple_new = tuple.__new__
_CR = ConsumerRecord
_NO_BUFFER = (None, 0, 0)
_NO_EPOCH = -1


def _header_size(headers) -> int:
    return sum(len(k.encode("utf-8")) + (0 if v is None else len(v)) for k, v in headers)


class _Columns(NamedTuple):
    """What :meth:`Fetcher.fetch` reads of a fetch: the fields of ``ColumnFetchResult`` it uses."""

    columns: tuple
    high_watermark: int
    next_offset: int


def batches_to_columns(batches, read_committed: bool, aborted_transactions=None) -> tuple[tuple, Optional[int]]:
    """The records of fetched ``batches`` (``[(BatchHeader, bytes)]``, in offset order) as
    columns ``(offsets, timestamps, keys, values, headers)``, and the offset after the last
    batch (None without batches). Kafka's clients' rule (``CompletedFetch``; txn facts §4.3):

    1. the aborted transactions (``[AbortedTxn]``, read_committed only) are sorted by first
       offset; a set holds the producer ids whose aborted transaction is open here;
    2. for each batch with a producer id, read_committed: every aborted transaction with
       ``first_offset <= batch last offset`` puts its producer id in the set; an ABORT marker
       takes its producer id out; a transactional data batch whose producer id is in the
       set is skipped whole;
    3. control batches are never returned, under either level.

    Example: ``[data(pid 7, offsets 0-1), ABORT(pid 7, offset 2), data(offset 3)]`` with the
    aborted list ``[AbortedTxn(7, 0, 2, 3)]`` gives offset 3 only (read_committed), and 0, 1,
    3 (read_uncommitted).
    """
    columns = offs, tss, keys, values, headers = [], [], [], [], []
    aborted = sorted(aborted_transactions or (), key=lambda a: a.first_offset) if read_committed else ()
    next_aborted = 0
    aborted_pids: set = set()
    h = None
    for h, raw in batches:
        attrs = h.attributes
        if attrs & (ATTR_CONTROL | ATTR_TRANSACTIONAL):
            if read_committed and h.producer_id >= 0:
                last = h.base_offset + h.last_offset_delta
                while next_aborted < len(aborted) and aborted[next_aborted].first_offset <= last:
                    aborted_pids.add(aborted[next_aborted].producer_id)
                    next_aborted += 1
                if attrs & ATTR_CONTROL:
                    ctrl = read_control_batch(raw, 0, h)
                    if ctrl is not None and ctrl[0].type == CONTROL_ABORT:
                        aborted_pids.discard(h.producer_id)
                    continue
                if h.producer_id in aborted_pids:
                    continue
            elif attrs & ATTR_CONTROL:
                continue
        extend_columns(columns, raw, 0, h)
    return (offs, tss, keys, values, headers), (None if h is None else h.next_offset)


_MOVED = (NotLeaderOrFollowerError, LeaderNotAvailableError, NetworkError, KafkaStorageError)


class Fetcher:
    """Pulls records for a :class:`SubscriptionState` from a broker."""

    def __init__(self, broker, subscriptions: SubscriptionState, *,
                 max_partition_fetch_bytes: int = 1_048_576, fetch_max_bytes: int = 52_428_800,
                 key_deserializer: Optional[Callable] = None,
                 value_deserializer: Optional[Callable] = None,
                 on_out_of_range: Optional[Callable[[TopicPartition], None]] = None,
                 client_rack: str = "", retry_backoff_ms: int = 100,
                 isolation_level: int = READ_UNCOMMITTED) -> None:
        self._broker = broker
        self.isolation_level = isolation_level
        # the stored batches when the broker has them (markers dropped, isolation applied)
        self._batches = callable(getattr(broker, "fetch_batches", None))
        self._subs = subscriptions
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.fetch_max_bytes = fetch_max_bytes
        self._kd = key_deserializer
        self._vd = value_deserializer
        self._on_out_of_range = on_out_of_range
        self._buffers: dict[TopicPartition, tuple] = {}   # tp -> (RecordColumns, next row, fetch's next offset)
        self._ts_type: dict[str, int] = {}
        self._next = 0
        # leader / closest-replica routing (a broker or cluster answering leader_for)
        self.client_rack = client_rack
        self.retry_backoff_ms = retry_backoff_ms
        self._routed = callable(getattr(broker, "leader_for", None))
        self._replica: dict[TopicPartition, int] = {}

    def invalidate(self, tp: Optional[TopicPartition] = None) -> None:
        if tp is None:
            self._buffers.clear()
        else:
            self._buffers.pop(tp, None)

    def _fetch_from(self, tp: TopicPartition, position: int, want: int):
        """One fetch, sent to the partition's leader, or with ``client_rack`` to the replica
        the cluster prefers for that rack (KIP-392); without routing, to the broker as is."""
        if not self._routed:
            if self._batches:
                return self._columns(self._broker.fetch_batches(tp.topic, tp.partition, position, want,
                                                                isolation_level=self.isolation_level), position)
            return self._broker.fetch_columns(tp.topic, tp.partition, position, want)
        node = self._replica.get(tp)
        if node is None:
            prefer = getattr(self._broker, "preferred_read_replica", None)
            node = (prefer(tp.topic, tp.partition, self.client_rack) if prefer is not None and self.client_rack
                    else self._broker.leader_for(tp.topic, tp.partition))
            self._replica[tp] = node
        if self._batches:
            return self._columns(self._broker.fetch_batches(tp.topic, tp.partition, position, want, node=node,
                                                            isolation_level=self.isolation_level), position)
        return self._broker.fetch_columns(tp.topic, tp.partition, position, want, node=node)

    def _columns(self, res, position: int) -> _Columns:
        """A ``fetch_batches`` answer as the columns :meth:`fetch` reads. With no batch, nothing
        below the bound (high watermark, or the last stable offset for read_committed) but
        record-less batches lies after ``position``: the next offset is the bound."""
        committed = self.isolation_level == READ_COMMITTED
        cols, next_offset = batches_to_columns(res.batches, committed, res.aborted_transactions)
        if next_offset is None:
            bound = res.last_stable_offset if committed else res.high_watermark
            next_offset = max(position, bound)
        return _Columns(cols, res.high_watermark, next_offset)

    def _timestamp_type(self, topic: str) -> int:
        t = self._ts_type.get(topic)
        if t is None:
            cfg = self._broker.topic_config(topic)
            t = LOG_APPEND_TIME if cfg.message_timestamp_type == "LogAppendTime" else CREATE_TIME
            self._ts_type[topic] = t
        return t

    def fetch(self, max_records: int) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Up to ``max_records`` records across the fetchable partitions, advancing positions."""
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        assignment = self._subs.assignment
        tps = [tp for tp, s in assignment.items() if not s.paused and s.position is not None]
        if not tps:
            return out
        n = len(tps)
        start = self._next % n
        budget = max_records
        bytes_left = self.fetch_max_bytes
        for i in range(n):
            if budget <= 0:
                break
            tp = tps[(start + i) % n]
            state = assignment[tp]
            cols, idx, next_offset = self._buffers.get(tp, _NO_BUFFER)
            if cols is None or idx >= len(cols[0]):
                if bytes_left <= 0:
                    continue
                want = min(self.max_partition_fetch_bytes, bytes_left)
                bytes_left -= want
                try:
                    res = self._fetch_from(tp, state.position, want)
                except OffsetOutOfRangeError:
                    if self._on_out_of_range is None:
                        raise
                    self._on_out_of_range(tp)     # resets the position or raises
                    res = self._fetch_from(tp, state.position, want)
                except _MOVED:
                    # a failover: forget the replica, back off retry_backoff_ms, ask again next time
                    self._replica.pop(tp, None)
                    clock = getattr(self._broker, "clock", None)
                    if clock is not None:
                        clock.sleep(self.retry_backoff_ms)
                    continue
                cols = res.columns
                next_offset = res.next_offset
                state.highwater = res.high_watermark     # Consumer.highwater()
                idx = bisect_left(cols[0], state.position)   # offsets increase: skip those below
                if idx >= len(cols[0]):
                    self._buffers.pop(tp, None)
                    if res.next_offset > state.position:   # only a compaction gap up to there
                        state.position = res.next_offset
                    continue
            end = idx + budget
            offsets = cols[0]
            n_buf = len(offsets)
            out[tp] = self._convert(tp, cols, idx, min(end, n_buf))
            if end < n_buf:
                self._buffers[tp] = (cols, end, next_offset)
                state.position = offsets[end - 1] + 1
            else:
                end = n_buf
                self._buffers.pop(tp, None)
                # past the batches read: markers and aborted batches after the last record too
                state.position = max(offsets[end - 1] + 1, next_offset)
            budget -= end - idx
            self._next = (start + i + 1) % n
        return out

    def _convert(self, tp: TopicPartition, cols, lo: int, hi: int) -> list[ConsumerRecord]:
        # The hot path: rows ``lo:hi`` of the fetched columns, one tuple per record built
        # with tuple.__new__ inside C iterators (no bytecode per record), the cyclic GC
        # paused as storage's read does (see storage/log.py).
        topic, part = tp
        tst = self._timestamp_type(topic)
        kd, vd = self._kd, self._vd
        offs, tss, keys, values, headers = cols
        if lo or hi < len(offs):
            offs, tss, keys, values, headers = (offs[lo:hi], tss[lo:hi], keys[lo:hi],
                                                values[lo:hi], headers[lo:hi])
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            # serialized sizes, in C loops when no key/value is None (or empty) and no record has headers
            ksizes = list(map(len, keys)) if all(keys) else [-1 if k is None else len(k) for k in keys]
            vsizes = list(map(len, values)) if all(values) else [-1 if v is None else len(v) for v in values]
            hsizes = [_header_size(h) if h else -1 for h in headers] if any(headers) else repeat(-1)
            # kafka-python calls a deserializer on None too (its DeserializeWrapper)
            if kd is not None:
                keys = list(map(kd, keys))
            if vd is not None:
                values = list(map(vd, values))
            return list(map(_tuple_new, repeat(_CR), zip(
                repeat(topic), repeat(part), repeat(_NO_EPOCH), offs, tss, repeat(tst), keys, values,
                headers, repeat(None), ksizes, vsizes, hsizes)))
        finally:
            if gc_was_enabled:
                gc.enable()
