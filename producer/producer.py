"""``Producer``: kafka-python's ``KafkaProducer`` API over an in-process :class:`kafkasim.broker.Broker`.

Lab code ports to a real cluster by changing only the construction::

    p = Producer(broker, client_id="orders-app", linger_ms=5)      # KafkaProducer(bootstrap_servers=...)
    fut = p.send("orders", key=b"merchant_000042", value=b"...")
    fut.get().partition, fut.get().offset
    p.flush(); p.close()

Pipeline (one job per module, as kafka-python/aiokafka split it):

1. ``send()`` (this module) serializes, checks the record (headers and an explicit
   timestamp, by the one record rule of ``kafkasim.records.validation``), picks the partition
   (explicit → checked; else the partitioner, see ``kafkasim/partitioning/partitioners.py``),
   optionally stamps the audit headers, and appends a tuple to the accumulator under
   **one** lock; it returns a future.
2. The accumulator closes batches (full / ``linger_ms`` passed on the injected clock /
   flush) into a FIFO ready queue (``producer/accumulator.py``; batches and futures in
   ``producer/batch.py``).
3. The sender (``producer/sender.py``) — run by whichever thread finds closed batches:
   ``send()``, ``poll()``, ``flush()``, a future's ``get()``, or the optional background
   thread — delivers them to ``Broker.produce``, retries (the in-flight model and the
   reorder lab are described there) and keeps the idempotent producer's id, epoch and
   sequences. Fault injection (``LOST_REQUEST``/``LOST_RESPONSE``, ``fault_rate``,
   ``fault_injector``) is ``producer/faults.py``; configs are ``producer/config.py``.

``flush(timeout)`` returns once every buffered record is acknowledged or failed; with a
``timeout`` (seconds, on the producer's clock) it paces retries by ``retry_backoff_ms``
on that clock and raises :class:`~kafkasim.errors.KafkaTimeoutError` when the time is up
with records still unacknowledged (they stay buffered), as kafka-python does.
``close(timeout)`` flushes the same way and, on timeout, fails what is left (as Java's
``close(Duration)``) before closing.

Differences from Kafka (deliberate, documented in docs/producer.md): there is no real
network, so ``retry_backoff_ms`` is counted against ``delivery_timeout_ms`` rather than
slept (except by ``flush(timeout)``), which bounds retries deterministically; configs
kafka-python accepts for the network, security or compression are accepted and ignored
with one :class:`~kafkasim.config.IgnoredConfigWarning`.

Invariants: per partition, batches are delivered in the order they were closed unless
a retry reorders them (only possible with idempotence off and more than one in flight);
the per-key sequence header (``kafkasim.seq``) is assigned under the producer's lock in
send order, so for one producer and one key it is 0, 1, 2, … in ``send()`` order.
Configs are validated once, in the constructor; ``send()`` does no config work.

Thread-safety: ``Producer`` is thread-safe; share one between threads as with Kafka.
``send()`` takes one lock; delivery is serialised by a second (send) lock in the sender.
"""

from __future__ import annotations

import itertools
import random
import threading
from typing import Any, Callable, Optional, Sequence

from kafkasim.arguments import bad_arg, check_arg
from kafkasim.clock import Clock, MockClock, SystemClock
from kafkasim.config import parse_configs, warn_ignored
from kafkasim.errors import (
    IllegalStateError, InvalidArgumentError, InvalidConfigurationError, KafkaTimeoutError,
    RecordTooLargeError, SerializationError, TransactionAbortedError, UnknownTopicOrPartitionError,
)
from kafkasim.records.compression import codec_id
from kafkasim.records.validation import RECORD_OVERHEAD, check_headers, check_timestamp
from kafkasim.types import PRODUCER_HEADER, SEQUENCE_HEADER, TopicPartition
from kafkasim.producer.accumulator import BATCH_OVERHEAD_ESTIMATE, RecordAccumulator
from kafkasim.producer.batch import FutureRecordMetadata, ProducerBatch
from kafkasim.producer.config import DEFAULT_CONFIG, PRODUCER_CONFIGS
from kafkasim.producer.faults import LOST_REQUEST, LOST_RESPONSE, FaultInjector
from kafkasim.producer.sender import Sender
from kafkasim.producer.transactions import TransactionManager
from kafkasim.partitioning.hashing import murmur2
from kafkasim.partitioning.partitioners import DefaultPartitioner, make_partitioner

__all__ = ["Producer", "KafkaProducer", "DEFAULT_CONFIG", "LOST_REQUEST", "LOST_RESPONSE"]

_KEY_CACHE_SIZE = 1 << 16

_client_ids = itertools.count(1)


class Producer:
    """A Kafka producer bound to one in-process broker. See the module docstring."""

    def __init__(self, broker, **configs: Any) -> None:
        _check_broker(broker)
        cfg, ignored = parse_configs("producer", PRODUCER_CONFIGS, configs)
        self._broker = broker
        self.config = cfg
        self._clock: Clock = cfg["clock"] or getattr(broker, "clock", None) or SystemClock()
        self.client_id = cfg["client_id"] or f"producer-{next(_client_ids)}"
        self._ident = self.client_id.encode("utf-8")
        self._key_ser: Optional[Callable] = cfg["key_serializer"]
        self._value_ser: Optional[Callable] = cfg["value_serializer"]
        self._acks = -1 if cfg["acks"] in ("all", "-1") else int(cfg["acks"])
        self._batch_size = cfg["batch_size"]
        self._max_request_size = cfg["max_request_size"]
        self._metadata_max_age_ms = cfg["metadata_max_age_ms"]
        self._idempotent = self._resolve_idempotence(cfg)
        self._txn: Optional[TransactionManager] = None
        if cfg["transactional_id"] is not None:
            _check_transactional_broker(broker)
            self._txn = TransactionManager(broker, cfg["transactional_id"], cfg["transaction_timeout_ms"],
                                           self._clock, cfg["retry_backoff_ms"])
        seed = cfg["seed"]
        if not isinstance(seed, (type(None), int, float, str, bytes, bytearray)):
            raise InvalidConfigurationError(f"Invalid value {seed!r} for configuration seed: Expected None, an "
                                            "integer, a number, a string or bytes (what random.Random takes)")

        self.partitioner = make_partitioner(cfg["partitioner"]).bind(
            clock=self._clock, rng=random.Random(seed), batch_size=self._batch_size)
        self._partition = self.partitioner.partition
        self._murmur2_fast = type(self.partitioner) is DefaultPartitioner
        self._stamp = cfg["stamp_headers"]

        self._lock = threading.Lock()          # send(): partitioner, key sequences, accumulator
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
        self._closed = False
        self._sends = 0
        self._checks = self._key_ser is not None or self._value_ser is not None or self._txn is not None
        self._m = {"record-send-total": 0, "record-retry-total": 0, "record-error-total": 0,
                   "batch-total": 0, "request-total": 0, "duplicate-batch-total": 0,
                   "injected-fault-total": 0, "byte-total": 0, "batch-split-total": 0}
        faults = FaultInjector(cfg["fault_rate"], cfg["fault_mode"], cfg["fault_injector"], seed)
        self._sender = Sender(broker, self._acc, self._lock, self._clock, acks=self._acks,
                              idempotent=self._idempotent, retries=cfg["retries"],
                              max_in_flight=cfg["max_in_flight_requests_per_connection"],
                              retry_backoff_ms=cfg["retry_backoff_ms"],
                              delivery_timeout_ms=cfg["delivery_timeout_ms"], faults=faults,
                              metrics=self._m,
                              compression=codec_id(cfg["compression_type"] or "none"), txn=self._txn)
        self._deliver = self._sender.deliver

        bg = cfg["background_sender"]
        if bg is None:
            bg = not isinstance(self._clock, MockClock) and self._linger_ms > 0
        if bg:
            self._sender.start(f"{self.client_id}-sender", self._linger_ms, lambda: self._sends)
        warn_ignored("producer", ignored)

    # ------------------------------------------------------------------ config helpers

    @staticmethod
    def _resolve_idempotence(cfg: dict) -> bool:
        explicit = cfg["enable_idempotence"]
        if cfg["transactional_id"] is not None:
            # kafka-python: a transactional producer is idempotent, and strict about conflicts
            if explicit is False:
                raise InvalidConfigurationError("Cannot set transactional_id without enable_idempotence.")
            if cfg["transactional_id"] == "":
                raise InvalidConfigurationError("Invalid value '' for configuration transactional_id: "
                                                "a transactional id cannot be empty")
            explicit = True
        conflicts = []
        if cfg["max_in_flight_requests_per_connection"] > 5:
            conflicts.append("Must set max.in.flight.requests.per.connection to at most 5 "
                             "to use the idempotent producer.")
        if cfg["retries"] == 0:
            conflicts.append("Must set retries to non-zero when using the idempotent producer.")
        if cfg["acks"] not in ("all", "-1"):
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
        explicit partition or a record larger than ``max_request_size``, and for a record
        that breaks the one record rule (:mod:`kafkasim.records.validation`): headers not
        ``(str, bytes | None)`` pairs (InvalidRecordError) or a timestamp not an int in
        [0, 2**63-1] (InvalidTimestampError). Nothing is queued then, and no sequence
        number is taken (sequences are assigned by the sender).
        """
        if self._checks:        # closed, or serializers configured
            if self._closed:
                raise IllegalStateError("Cannot perform operation after producer has been closed")
            if self._txn is not None:
                self._txn.check_send()        # only inside a transaction (kafka-python)
            # kafka-python calls a serializer on None too (its SerializeWrapper): a tombstone
            # sent through value_serializer=msgpack.dumps stores msgpack's nil, b"\xc0"
            if self._key_ser is not None:
                key = self._key_ser(key)
            if self._value_ser is not None:
                value = self._value_ser(value)
        if key is not None and type(key) is not bytes:
            key = _to_bytes("key", key)
        if value is not None and type(value) is not bytes:
            value = _to_bytes("value", value)
        now = self._now()
        meta = self._meta.get(topic) if type(topic) is str else None
        if meta is None or now >= meta[1]:
            meta = self._refresh_metadata(topic, now)      # checks the topic argument
        n = meta[0]
        size = RECORD_OVERHEAD
        if key is not None:
            size += len(key)
        if value is not None:
            size += len(value)
        if headers is not None:
            # the one record rule (kafkasim.records.validation): pairs of (str, bytes | None)
            headers, hsize = check_headers(headers)
            size += hsize
        if self._stamp:
            size += self._stamp_size
        if size > self._max_record_size:
            raise RecordTooLargeError(
                f"The message is {size + BATCH_OVERHEAD_ESTIMATE} bytes when serialized which is larger "
                f"than {self._max_request_size}, which is the value of the max.request.size configuration.")
        if partition is not None:
            if type(partition) is not int or partition < 0:
                raise InvalidArgumentError(
                    f"Invalid partition: {partition!r}. Partition number should always be non-negative or null.")
            if partition >= n:
                raise InvalidArgumentError(
                    f"Invalid partition given with record: {partition} is not in the range [0...{n}).")
        ts = now if timestamp_ms is None else check_timestamp(timestamp_ms)
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
                fut = FutureRecordMetadata(batch, delta)
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
        if check_arg("timeout_ms", timeout_ms, "number", min=0):
            self._clock.sleep(timeout_ms)
        with self._lock:
            self._acc.expire(self._clock.now_ms())
        return self._deliver(block=True, force=True)

    def flush(self, timeout: Optional[float] = None) -> None:
        """Send every buffered record now and wait until each has been acknowledged (or failed).

        With ``timeout`` (seconds, measured on the producer's clock: simulated time on a
        MockClock), retries are paced by ``retry_backoff_ms`` on that clock and
        :class:`KafkaTimeoutError` is raised once ``timeout`` has passed with records still
        unacknowledged; they stay buffered, and a later ``flush()`` or ``close()`` goes on.
        """
        check_arg("timeout", timeout, "number", min=0, none_ok=True, what="a number of seconds")
        with self._lock:
            self._acc.close_all()
        if timeout is None:
            self._deliver(block=True, force=True)
            return
        if not self._sender.deliver_until(self._clock.now_ms() + int(timeout * 1000)):
            raise KafkaTimeoutError(
                f"Failed to flush accumulated records within {timeout} secs: "
                f"{self._sender.pending_retries} batch(es) still unacknowledged after retries")

    def close(self, timeout: Optional[float] = None) -> None:
        """Flush, stop the background sender, and refuse further sends. Idempotent.

        With ``timeout``, records still unacknowledged when it runs out are failed
        (their futures raise KafkaTimeoutError), as Java's ``close(Duration)`` does.
        """
        if self._closed:
            return
        check_arg("timeout", timeout, "number", min=0, none_ok=True, what="a number of seconds")
        try:
            self.flush(timeout)
        except KafkaTimeoutError as exc:
            self._sender.abort_pending(KafkaTimeoutError(
                f"Producer closed with records unacknowledged after {timeout} secs: {exc}"))
        self._closed = True
        self._checks = True
        self._sender.stop(timeout)

    # ------------------------------------------------------------------ transactions

    def _transactions(self, what: str) -> TransactionManager:
        if self._txn is None:
            raise IllegalStateError(f"Cannot {what} without setting a transactional_id.")
        if self._closed:
            raise IllegalStateError("Cannot perform operation after producer has been closed")
        return self._txn

    def init_transactions(self) -> None:
        """Needs to be called before any other transactional method (kafka-python's). Fences
        every earlier producer with the same ``transactional_id`` (aborting its open
        transaction) and takes the producer id and epoch used from then on. Calling it again
        after a success does nothing.

        Raises IllegalStateError without a ``transactional_id``; ProducerFencedError or the
        broker's error otherwise."""
        pid, epoch = self._transactions("call init_transactions").initialize()
        self._sender.set_producer(pid, epoch)

    def begin_transaction(self) -> None:
        """Start a transaction (no request is sent until the first record or offsets);
        IllegalStateError unless :meth:`init_transactions` succeeded and no transaction is open."""
        self._transactions("use transactional methods").begin()

    def send_offsets_to_transaction(self, offsets: dict, group_metadata: Any) -> None:
        """Commit ``offsets`` ({TopicPartition: OffsetAndMetadata or int}: the next offsets to
        read) for the consumer group of ``group_metadata`` (``Consumer.group_metadata()``, or
        a group id str) as part of the open transaction: they become the group's committed
        offsets only if the transaction commits (kafka-python's; AddOffsetsToTxn then
        TxnOffsetCommit). IllegalStateError outside a transaction."""
        self._transactions("use transactional methods").send_offsets(offsets, group_metadata)

    def commit_transaction(self) -> None:
        """Flush every record sent in the transaction, then commit it (EndTxn). If a record
        failed, its error is raised and the transaction can only be aborted; a fenced producer
        raises ProducerFencedError."""
        txn = self._transactions("commit transaction since transactions are not enabled and")
        txn.begin_commit()
        self.flush()
        txn.end(commit=True)

    def abort_transaction(self) -> None:
        """Abort the open transaction: its records are never seen by ``read_committed``
        consumers and its offsets are dropped. Records not yet sent are sent first (their
        futures resolve), unless the transaction already failed (then they are failed)."""
        txn = self._transactions("abort transaction since transactions are not enabled and")
        if txn.begin_abort():
            with self._lock:
                self._acc.close_all()
            self._sender.abort_pending(TransactionAbortedError(
                "Failing batch since transaction was aborted"))
        else:
            self.flush()
        txn.end(commit=False)

    def partitions_for(self, topic: str) -> set[int]:
        """The partition numbers of ``topic`` (refreshing the cached count)."""
        return set(range(self._refresh_metadata(topic, self._clock.now_ms())[0]))

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ metadata

    def _refresh_metadata(self, topic: str, now: int) -> int:
        check_arg("topic", topic, "str")
        try:
            if self.config["allow_auto_create_topics"]:
                n = self._broker.auto_create_topic(topic)      # as the broker's auto.create.topics.enable says
            else:
                n = self._broker.partition_count(topic)
        except UnknownTopicOrPartitionError as exc:
            raise KafkaTimeoutError(f"Topic {topic} not present in metadata after 0 ms. ({exc})") from exc
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

    def _wait_batch(self, batch: ProducerBatch, timeout: Optional[float]) -> None:
        """A future's ``get()`` on an unsent batch (the accumulator's waiter): the sender sends it."""
        self._sender.wait_batch(batch, timeout)

    def metrics(self) -> dict[str, dict[str, float]]:
        """Counters, kafka-python style: ``{"producer-metrics": {name: value}}`` with Kafka's names."""
        m = dict(self._m)
        m["producer-id"] = self._sender.producer_id
        m["buffered-batch-count"] = self._acc.open_count() + len(self._acc.ready)
        batches = m["batch-total"]
        m["records-per-batch-avg"] = (m["record-send-total"] / batches) if batches else 0.0
        return {"producer-metrics": m}


KafkaProducer = Producer
"""kafka-python's name: ``KafkaProducer(broker, linger_ms=5)`` is :class:`Producer`."""


def _check_broker(broker: Any) -> None:
    """The producer needs the broker API (broker/API.md): produce, partition_count, init_producer_id."""
    if not all(callable(getattr(broker, name, None))
               for name in ("produce", "partition_count", "init_producer_id")):
        raise bad_arg("broker", broker, "a kafkasim Broker (an object with the broker API)")


_TXN_CALLS = ("init_transactional_producer_id", "add_partitions_to_txn", "add_offsets_to_txn",
              "txn_offset_commit", "end_txn")


def _check_transactional_broker(broker: Any) -> None:
    """A transactional producer needs the broker's transaction API (broker/protocol.py's
    TransactionalBrokerAPI)."""
    missing = [n for n in _TXN_CALLS if not callable(getattr(broker, n, None))]
    if missing:
        raise InvalidConfigurationError(
            f"transactional_id needs a broker with the transaction API; {type(broker).__name__} lacks "
            + ", ".join(missing))


def _to_bytes(what: str, v: Any) -> bytes:
    """bytes of a bytes-like key/value; anything else is a SerializationError (a TypeError,
    as kafka-python raises there) naming the argument and its value."""
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    shown = repr(v) if len(repr(v)) <= 60 else repr(v)[:57] + "..."
    raise SerializationError(
        f"Producer.send({what}={shown}): Not supported type for {what}: {type(v)}; the {what} must be "
        f"bytes, or set {what}_serializer (e.g. {what}_serializer=str.encode"
        + (", or json.dumps(v).encode() for a dict" if isinstance(v, (dict, list)) else "") + ")")
