"""``Producer``: kafka-python's ``KafkaProducer`` API over an in-process :class:`kafkasim.broker.Broker`.

Lab code ports to a real cluster by changing only the construction::

    p = Producer(broker, client_id="orders-app", linger_ms=5)      # KafkaProducer(bootstrap_servers=...)
    fut = p.send("orders", key=b"merchant_000042", value=b"...")
    fut.get().partition, fut.get().offset
    p.flush(); p.close()

Pipeline (one job per module, as kafka-python/aiokafka split it):

1. ``send()`` serializes, picks the partition (explicit → checked; else the
   partitioner, see ``kafkasim/partitioning/partitioners.py``), optionally stamps the audit headers,
   and appends a tuple to the accumulator under **one** lock; it returns a future.
2. The accumulator closes batches (full / ``linger_ms`` passed on the injected clock /
   flush) into a FIFO ready queue (``producer/accumulator.py``).
3. The sender — whichever thread finds closed batches: ``send()``, ``poll()``,
   ``flush()``, a future's ``get()``, or the optional background thread — takes the send
   lock and delivers the ready batches. Each batch is encoded once
   (``kafkasim.records.record_batch.encode_trusted_batch``: encode_batch's bytes, without its
   per-record checks, which the accumulator's records pass by construction) with the producer id, epoch and base sequence
   (idempotence), then ``Broker.produce`` is called.

Retries and the reorder lab (the in-flight model): a batch whose attempt fails with a
retriable error (``NetworkError`` from fault injection, or a retriable broker error) is
retried only after up to ``max_in_flight_requests_per_connection - 1`` later batches of
its partition were attempted — they were "in flight" with it — or at ``flush()``,
``poll()``, ``get()`` or ``close()`` when nothing later is left. So with idempotence off
and more than one request in flight, a failed first attempt lets later batches land
first: Kafka's classic reordering, reproducible with ``fault_rate``/``fault_injector`` and
``seed``. With idempotence on, the later batches are rejected by the broker
(``OutOfOrderSequenceNumberError``, a sequence gap) and retried in sequence order, and a
batch whose response was lost is recognised as a duplicate (same producer id, epoch and
base sequence) and not written twice. Until a partition has acknowledged its first batch
from this producer id, an idempotent producer keeps one batch in flight there (the
broker cannot detect a gap for a producer it does not know yet).

Differences from Kafka (deliberate, documented in docs/producer.md): there is no real
network, so ``retry_backoff_ms`` is not slept; instead each attempt *counts*
``retry_backoff_ms`` against ``delivery_timeout_ms``, which bounds retries
deterministically. If an idempotent batch fails for good, the queued batches behind it
on that partition fail with it and the partition's sequence restarts at the failed
batch's base sequence (Kafka bumps the epoch instead).

Invariants: per partition, batches are delivered in the order they were closed unless
a retry reorders them (only possible with idempotence off and more than one in flight);
the per-key sequence header (``kafkasim.seq``) is assigned under the producer's lock in
send order, so for one producer and one key it is 0, 1, 2, … in ``send()`` order.

Thread-safety: ``Producer`` is thread-safe; share one between threads as with Kafka.
``send()`` takes one lock; delivery is serialised by a second (send) lock.
"""

from __future__ import annotations

import itertools
import random
import threading
from collections import deque
from typing import Any, Callable, Optional, Sequence

from kafkasim.clock import Clock, MockClock, SystemClock
from kafkasim.errors import (
    IllegalStateError, InvalidArgumentError, InvalidConfigurationError, KafkaSimError,
    KafkaTimeoutError, NetworkError, OutOfOrderSequenceNumberError, RecordTooLargeError,
    UnknownTopicOrPartitionError,
)
from kafkasim.types import PRODUCER_HEADER, SEQUENCE_HEADER, TopicPartition
from kafkasim.producer.accumulator import BATCH_OVERHEAD_ESTIMATE, RECORD_OVERHEAD, RecordAccumulator
from kafkasim.producer.batch import FutureRecordMetadata, ProducerBatch
from kafkasim.partitioning.hashing import murmur2
from kafkasim.partitioning.partitioners import DefaultPartitioner, make_partitioner
from kafkasim.records.record_batch import encode_trusted_batch

__all__ = ["Producer", "DEFAULT_CONFIG", "LOST_REQUEST", "LOST_RESPONSE"]

LOST_REQUEST = "lost_request"
"""Fault: the produce request never reached the broker (nothing written)."""
LOST_RESPONSE = "lost_response"
"""Fault: the broker appended the batch but the response was lost (a retry may duplicate)."""

_INT_MAX = 2**31 - 1
_KEY_CACHE_SIZE = 1 << 16

DEFAULT_CONFIG: dict[str, Any] = {
    # Kafka's Java producer defaults (4.x): acks=all, linger.ms=5 (KIP-1030), idempotence on.
    "client_id": None,                 # -> "producer-<n>", as Kafka
    "key_serializer": None,
    "value_serializer": None,
    "acks": "all",
    "batch_size": 16384,
    "linger_ms": 5,
    "max_request_size": 1048576,
    "retries": _INT_MAX,
    "enable_idempotence": None,        # None = Kafka's default (on) unless other configs conflict
    "max_in_flight_requests_per_connection": 5,
    "partitioner": None,               # name, Partitioner, or kafka-python callable; None -> murmur2
    "retry_backoff_ms": 100,
    "delivery_timeout_ms": 120000,
    "metadata_max_age_ms": 300000,
    # kafkasim-only
    "clock": None,                     # kafkasim.clock.Clock; None -> the broker's clock
    "seed": 0,                         # seeds the partitioner's RNG and fault injection
    "stamp_headers": False,            # add kafkasim.producer / kafkasim.seq headers
    "fault_rate": 0.0,                 # probability that a batch's FIRST attempt fails
    "fault_mode": LOST_REQUEST,        # or LOST_RESPONSE
    "fault_injector": None,            # fn(tp, batch_no, attempt) -> None | LOST_REQUEST | LOST_RESPONSE
    "background_sender": None,         # None -> a linger thread only for a non-Mock clock
}

_client_ids = itertools.count(1)
_tuple_new = tuple.__new__   # FutureRecordMetadata is a 2-tuple: skip the type call


def _bad(name: str, value: Any, why: str) -> InvalidConfigurationError:
    return InvalidConfigurationError(f"Invalid value {value!r} for configuration {name}: {why}")


class Producer:
    """A Kafka producer bound to one in-process broker. See the module docstring."""

    def __init__(self, broker, **configs: Any) -> None:
        unknown = sorted(set(configs) - set(DEFAULT_CONFIG))
        if unknown:
            raise InvalidConfigurationError(
                f"Unrecognized producer configs: {', '.join(unknown)} "
                f"(known: {', '.join(sorted(DEFAULT_CONFIG))})")
        cfg = dict(DEFAULT_CONFIG, **configs)
        self._broker = broker
        self.config = cfg
        self._clock: Clock = cfg["clock"] or getattr(broker, "clock", None) or SystemClock()
        self.client_id = cfg["client_id"] or f"producer-{next(_client_ids)}"
        self._ident = self.client_id.encode("utf-8")
        self._key_ser: Optional[Callable] = cfg["key_serializer"]
        self._value_ser: Optional[Callable] = cfg["value_serializer"]

        acks = cfg["acks"]
        if acks in ("all", "-1", -1):
            acks = -1
        elif acks in (0, 1, "0", "1"):
            acks = int(acks)
        else:
            raise _bad("acks", acks, "String must be one of: all, -1, 0, 1")
        self._acks = acks
        for name, lo in (("batch_size", 0), ("linger_ms", 0), ("max_request_size", 0),
                         ("retries", 0), ("max_in_flight_requests_per_connection", 1),
                         ("retry_backoff_ms", 0), ("delivery_timeout_ms", 0),
                         ("metadata_max_age_ms", 0)):
            v = cfg[name]
            if isinstance(v, bool) or not isinstance(v, int):
                raise _bad(name, v, "Expected value to be a 32-bit integer")
            if v < lo:
                raise _bad(name, v, f"Value must be at least {lo}")
        self._batch_size = cfg["batch_size"]
        self._max_request_size = cfg["max_request_size"]
        self._retries = cfg["retries"]
        self._max_in_flight = cfg["max_in_flight_requests_per_connection"]
        self._retry_backoff_ms = cfg["retry_backoff_ms"]
        self._delivery_timeout_ms = cfg["delivery_timeout_ms"]
        self._metadata_max_age_ms = cfg["metadata_max_age_ms"]
        self._idempotent = self._resolve_idempotence(cfg["enable_idempotence"])

        if not 0.0 <= float(cfg["fault_rate"]) <= 1.0:
            raise _bad("fault_rate", cfg["fault_rate"], "Value must be within [0, 1]")
        if cfg["fault_mode"] not in (LOST_REQUEST, LOST_RESPONSE):
            raise _bad("fault_mode", cfg["fault_mode"], f"String must be one of: {LOST_REQUEST}, {LOST_RESPONSE}")
        self._fault_rate = float(cfg["fault_rate"])
        self._fault_mode = cfg["fault_mode"]
        self._fault_injector = cfg["fault_injector"]
        seed = cfg["seed"]
        self._fault_rng = random.Random(f"{seed}:faults")

        self.partitioner = make_partitioner(cfg["partitioner"]).bind(
            clock=self._clock, rng=random.Random(seed), batch_size=self._batch_size)
        self._partition = self.partitioner.partition
        self._murmur2_fast = type(self.partitioner) is DefaultPartitioner
        self._stamp = bool(cfg["stamp_headers"])

        self._lock = threading.Lock()          # send(): partitioner, key sequences, accumulator
        self._send_lock = threading.RLock()    # delivery to the broker, one thread at a time
        self._sending_thread: Optional[int] = None
        self._acc = RecordAccumulator(self._batch_size, cfg["linger_ms"], self._wait_batch)
        self._linger_ms = cfg["linger_ms"]
        self._meta: dict[str, list] = {}
        self._now = self._clock.now_ms
        self._append = self._acc.append
        self._ready = self._acc.ready
        self._max_record_size = self._max_request_size - BATCH_OVERHEAD_ESTIMATE
        self._stamp_size = 2 * RECORD_OVERHEAD + len(PRODUCER_HEADER) + len(SEQUENCE_HEADER) \
            + len(self._ident) + 6
        self._key_seq: dict = {}
        self._producer_id = -1
        self._producer_epoch = -1
        self._next_seq: dict[TopicPartition, int] = {}
        self._acked_once: set[TopicPartition] = set()
        self._retry: dict[TopicPartition, list] = {}      # batches awaiting a retry, per partition
        self._overtaken: dict[TopicPartition, int] = {}   # later batches attempted since the retry
        self._closed = False
        self._sends = 0
        self._checks = self._key_ser is not None or self._value_ser is not None
        self._m = {"record-send-total": 0, "record-retry-total": 0, "record-error-total": 0,
                   "batch-total": 0, "request-total": 0, "duplicate-batch-total": 0,
                   "injected-fault-total": 0, "byte-total": 0}

        bg = cfg["background_sender"]
        if bg is None:
            bg = not isinstance(self._clock, MockClock) and self._linger_ms > 0
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        if bg:
            self._thread = threading.Thread(target=self._linger_loop, name=f"{self.client_id}-sender",
                                            daemon=True)
            self._thread.start()

    # ------------------------------------------------------------------ config helpers

    def _resolve_idempotence(self, explicit: Optional[bool]) -> bool:
        conflicts = []
        if self._max_in_flight > 5:
            conflicts.append("Must set max.in.flight.requests.per.connection to at most 5 "
                             "to use the idempotent producer.")
        if self._retries == 0:
            conflicts.append("Must set retries to non-zero when using the idempotent producer.")
        if self._acks != -1:
            conflicts.append("Must set acks to all in order to use the idempotent producer. "
                             "Otherwise we cannot guarantee idempotence.")
        if explicit is None:           # Kafka: silently off when other configs conflict
            return not conflicts
        if explicit and conflicts:
            raise InvalidConfigurationError(conflicts[0])
        return bool(explicit)

    @property
    def idempotent(self) -> bool:
        return self._idempotent

    # ------------------------------------------------------------------ public API

    def send(self, topic: str, value: Any = None, key: Any = None, headers: Optional[Sequence] = None,
             partition: Optional[int] = None, timestamp_ms: Optional[int] = None) -> FutureRecordMetadata:
        """Queue one record; return a future resolving to its RecordMetadata.

        Raises at once (like Kafka) for a closed producer, an unknown topic, an invalid
        explicit partition or a record larger than ``max_request_size``.
        """
        if self._checks:        # closed, or serializers configured
            if self._closed:
                raise IllegalStateError("Cannot perform operation after producer has been closed")
            if key is not None and self._key_ser is not None:
                key = self._key_ser(key)
            if value is not None and self._value_ser is not None:
                value = self._value_ser(value)
        if key is not None and type(key) is not bytes:
            key = _to_bytes("key", key)
        if value is not None and type(value) is not bytes:
            value = _to_bytes("value", value)
        now = self._now()
        meta = self._meta.get(topic)
        if meta is None or now >= meta[1]:
            meta = self._refresh_metadata(topic, now)
        n = meta[0]
        size = RECORD_OVERHEAD
        if key is not None:
            size += len(key)
        if value is not None:
            size += len(value)
        if headers:
            headers = tuple(headers)
            for hk, hv in headers:
                size += len(hk) + (len(hv) if hv is not None else 0)
        if self._stamp:
            size += self._stamp_size
        if size > self._max_record_size:
            raise RecordTooLargeError(
                f"The message is {size + BATCH_OVERHEAD_ESTIMATE} bytes when serialized which is larger "
                f"than {self._max_request_size}, which is the value of the max.request.size configuration.")
        if partition is not None:
            if type(partition) is not int or partition < 0:
                raise InvalidArgumentError(
                    f"Invalid partition: {partition}. Partition number should always be non-negative or null.")
            if partition >= n:
                raise InvalidArgumentError(
                    f"Invalid partition given with record: {partition} is not in the range [0...{n}).")
        if timestamp_ms is None:
            ts = now
        elif type(timestamp_ms) is int and timestamp_ms >= 0:
            ts = timestamp_ms
        else:
            raise InvalidArgumentError(
                f"Invalid timestamp: {timestamp_ms}. Timestamp should always be non-negative or null.")
        with self._lock:
            if partition is None:
                if key is not None and self._murmur2_fast:
                    # the default partitioner's keyed rule, inlined: a pure function, cached per count
                    partition = meta[3].get(key)
                    if partition is None:
                        partition = self._keyed_partition(meta, key)
                else:
                    partition = self._partition(topic, key, n, ts, size)
                    if type(partition) is not int or not 0 <= partition < n:
                        raise InvalidArgumentError(
                            f"partitioner {self.partitioner.name!r} returned partition {partition!r} "
                            f"for topic {topic}, not in the range [0...{n})")
            if self._stamp:
                seq = self._key_seq.get(key, 0)
                self._key_seq[key] = seq + 1
                stamp = ((PRODUCER_HEADER, self._ident), (SEQUENCE_HEADER, str(seq).encode()))
                headers = headers + stamp if headers else stamp
            batch = meta[4][partition]
            if batch is not None and now < self._acc.next_expiry \
                    and batch.size + size < self._batch_size:
                # the accumulator's fast path, inlined (see RecordAccumulator's contract)
                records = batch.records
                delta = len(records)
                records.append((delta, ts, key, value, headers or ()))
                batch.size += size
                fut = _tuple_new(FutureRecordMetadata, (batch, delta))
            else:
                fut = self._append(meta[4], meta[2][partition], now, ts, key, value, headers or (), size)
            self._sends += 1
        if self._ready:
            self._deliver(block=False)
        return fut

    def _keyed_partition(self, meta: list, key: bytes) -> int:
        cache = meta[3]
        if len(cache) >= _KEY_CACHE_SIZE:
            cache.clear()
        p = cache[key] = (murmur2(key) & 0x7FFFFFFF) % meta[0]
        return p

    def poll(self, timeout_ms: int = 0) -> int:
        """Close lingered batches (by the clock) and deliver ready ones; return batches delivered."""
        if timeout_ms:
            self._clock.sleep(timeout_ms)
        with self._lock:
            self._acc.expire(self._clock.now_ms())
        return self._deliver(block=True, force=True)

    def flush(self, timeout: Optional[float] = None) -> None:
        """Send every buffered record now and wait until each has been acknowledged (or failed)."""
        with self._lock:
            self._acc.close_all()
        self._deliver(block=True, force=True)

    def close(self, timeout: Optional[float] = None) -> None:
        """Flush, stop the background sender, and refuse further sends. Idempotent."""
        if self._closed:
            return
        self.flush(timeout)
        self._closed = True
        self._checks = True
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def partitions_for(self, topic: str) -> set[int]:
        """The partition numbers of ``topic`` (refreshing the cached count)."""
        return set(range(self._refresh_metadata(topic, self._clock.now_ms())[0]))

    def metrics(self) -> dict[str, dict[str, float]]:
        """Counters, kafka-python style: ``{"producer-metrics": {name: value}}`` with Kafka's names."""
        m = dict(self._m)
        m["producer-id"] = self._producer_id
        m["buffered-batch-count"] = self._acc.open_count() + len(self._acc.ready)
        batches = m["batch-total"]
        m["records-per-batch-avg"] = (m["record-send-total"] / batches) if batches else 0.0
        return {"producer-metrics": m}

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ metadata

    def _refresh_metadata(self, topic: str, now: int) -> int:
        try:
            n = self._broker.partition_count(topic)
        except UnknownTopicOrPartitionError as exc:
            raise KafkaTimeoutError(
                f"Topic {topic} not present in metadata after 0 ms. "
                f"(kafkasim has no topic auto-creation: create it first, e.g. "
                f"`kafkasim topics create {topic}`)") from exc
        expires = now + self._metadata_max_age_ms
        old = self._meta.get(topic)
        if old is not None and old[0] == n:
            old[1] = expires
            return old
        # [count, refresh-at ms, TopicPartition per partition, key -> partition cache for this
        #  count, the accumulator's open-batch slots of the topic]
        with self._lock:
            slots = self._acc.slots_for(topic, n)
        meta = self._meta[topic] = [n, expires, [TopicPartition(topic, p) for p in range(n)], {}, slots]
        return meta

    # ------------------------------------------------------------------ sender

    def _linger_loop(self) -> None:
        """Background sender (real clocks only): sends batches that lingered while sends were idle.

        While ``send()`` keeps being called it closes lingered batches itself (every append
        checks the clock), so this thread stays out of the way: it only acts after a whole
        period without a send, and never blocks on the send lock.
        """
        period = max(0.001, min(self._linger_ms, 100) / 1000.0)
        seen = -1
        while not self._stop.wait(period):
            try:
                sends = self._sends
                if sends != seen:
                    seen = sends
                    continue
                if self._acc.open_count():
                    now = self._clock.now_ms()
                    if self._acc.next_expiry <= now:
                        with self._lock:
                            self._acc.expire(now)
                if self._ready or self._retry:
                    self._deliver(block=False, force=True)
            except Exception:  # the futures carry delivery errors; never kill the thread
                pass

    def _wait_batch(self, batch: ProducerBatch, timeout: Optional[float]) -> None:
        """A future's ``get()`` on an unsent batch: send it now instead of waiting for linger."""
        if self._sending_thread == threading.get_ident():
            return
        with self._lock:
            self._acc.close_partition(batch.tp)
        self._deliver(block=True, force=True)

    def _deliver(self, block: bool, force: bool = False) -> int:
        """Deliver every ready batch; with ``force`` also every batch awaiting a retry.

        Returns how many batch attempts this call made.
        """
        me = threading.get_ident()
        if self._sending_thread == me:        # re-entered from a callback: the outer loop delivers
            return 0
        done = 0
        while True:
            if not self._send_lock.acquire(blocking=block):
                return done
            try:
                self._sending_thread = me
                while True:
                    with self._lock:
                        batches = self._acc.drain()
                    if not batches and not (force and self._retry):
                        break
                    done += self._send_batches(batches, force)
            finally:
                self._sending_thread = None
                self._send_lock.release()
            if not self._acc.ready:
                return done

    def _send_batches(self, batches: list[ProducerBatch], force: bool) -> int:
        queues: dict[TopicPartition, deque] = {}
        for b in batches:
            q = queues.get(b.tp)
            if q is None:
                q = queues[b.tp] = deque()
            q.append(b)
        if force:
            for tp in list(self._retry):
                queues.setdefault(tp, deque())
        attempts = 0
        for tp, q in queues.items():
            attempts += self._send_partition(tp, q, force)
        return attempts

    def _send_partition(self, tp: TopicPartition, queue: deque, force: bool) -> int:
        """Attempt ``queue`` (new batches of ``tp``, in order), interleaving pending retries.

        In-flight model: a batch whose attempt failed with a retriable error is retried
        only after up to ``max_in_flight - 1`` later batches of the partition were
        attempted (they were "in flight" with it), or when ``force`` (flush, poll,
        ``get()``, close) and no later batch is left. One in flight → retried at once.
        """
        m = self._m
        retry = self._retry.get(tp)
        attempts = 0
        while True:
            width = self._max_in_flight
            if self._idempotent and tp not in self._acked_once:
                width = 1
            if retry and (self._overtaken.get(tp, 0) >= width - 1 or (force and not queue)):
                retry.sort(key=_batch_no)            # retried in their original order
                queue.extendleft(reversed(retry))
                retry = None
                del self._retry[tp]
                self._overtaken[tp] = 0
            if not queue:
                break
            b = queue.popleft()
            attempts += 1
            err = self._attempt(b)
            if retry is not None and b not in retry:
                self._overtaken[tp] = self._overtaken.get(tp, 0) + 1
            if err is None:
                continue
            retriable = self._acks != 0 and (
                err.retriable or (self._idempotent and isinstance(err, OutOfOrderSequenceNumberError)))
            if retriable and b.attempts <= self._retries \
                    and b.attempts * self._retry_backoff_ms < self._delivery_timeout_ms:
                m["record-retry-total"] += len(b.records)
                if retry is None:
                    retry = self._retry[tp] = []
                    self._overtaken[tp] = 0
                retry.append(b)
                continue
            if retriable and b.attempts > self._retries:
                final: BaseException = err
            elif retriable:
                final = KafkaTimeoutError(
                    f"Expiring {len(b.records)} record(s) for {tp}:{self._delivery_timeout_ms} ms "
                    f"has passed since batch creation (after {b.attempts} attempts; last error: "
                    f"{type(err).__name__}: {err})")
                final.__cause__ = err
            else:
                final = err
            self._fail(b, final)
            if self._idempotent:
                # the later batches of this partition cannot be written in sequence: fail them too
                for later in list(queue) + (retry or []):
                    self._fail(later, final)
                queue.clear()
                self._retry.pop(tp, None)
                retry = None
                self._next_seq[tp] = b.base_sequence
                break
        return attempts

    def _fail(self, b: ProducerBatch, err: BaseException) -> None:
        if not b.done:
            self._m["record-error-total"] += len(b.records)
            b.complete(-1, error=err)

    def _fault_for(self, b: ProducerBatch) -> Optional[str]:
        if self._fault_injector is not None:
            return self._fault_injector(b.tp, b.batch_no, b.attempts)
        if self._fault_rate and b.attempts == 1 and self._fault_rng.random() < self._fault_rate:
            return self._fault_mode
        return None

    def _attempt(self, b: ProducerBatch) -> Optional[KafkaSimError]:
        """One produce request for ``b``; completes it on success, else returns the error."""
        tp = b.tp
        if b.encoded is None:
            if self._idempotent:
                if self._producer_id < 0:
                    self._producer_id, self._producer_epoch = self._broker.init_producer_id()
                seq = self._next_seq.get(tp, 0)
                b.base_sequence = seq
                self._next_seq[tp] = (seq + len(b.records)) & _INT_MAX
            try:
                # the accumulator's records are well-formed by construction (deltas 0..n-1,
                # timestamps checked in send()); the broker validates the batch anyway
                b.encoded = encode_trusted_batch(b.records, producer_id=self._producer_id,
                                                 producer_epoch=self._producer_epoch,
                                                 base_sequence=b.base_sequence)
            except KafkaSimError as exc:
                return exc
            self._m["batch-total"] += 1
            self._m["record-send-total"] += len(b.records)
        b.attempts += 1
        fault = self._fault_for(b)
        self._m["request-total"] += 1
        try:
            if fault == LOST_REQUEST:
                self._m["injected-fault-total"] += 1
                raise NetworkError(
                    f"injected fault: produce request for {tp} batch #{b.batch_no} "
                    f"(attempt {b.attempts}) was lost before reaching the broker")
            res = self._broker.produce(tp.topic, tp.partition, b.encoded, acks=self._acks)
            self._m["byte-total"] += len(b.encoded)
            if fault == LOST_RESPONSE and self._acks != 0:
                self._m["injected-fault-total"] += 1
                raise NetworkError(
                    f"injected fault: the response for {tp} batch #{b.batch_no} (attempt {b.attempts}) "
                    f"was lost after the broker appended it at offset {res.base_offset}")
        except KafkaSimError as exc:
            if self._acks == 0:        # fire and forget: the producer never hears about it
                b.complete(-1)
                return None
            return exc
        if res.duplicate:
            self._m["duplicate-batch-total"] += 1
        self._acked_once.add(tp)
        b.complete(-1 if self._acks == 0 else res.base_offset, res.log_append_time, res.log_start_offset)
        return None


def _batch_no(b: ProducerBatch) -> int:
    return b.batch_no


def _to_bytes(what: str, v: Any) -> bytes:
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    raise InvalidArgumentError(
        f"{what} must be bytes (or set {what}_serializer), got {type(v).__name__}: {v!r:.60}")
