"""The producer's sender: drains closed batches to the broker, retries, keeps idempotence state.

As in kafka-python and aiokafka, the sender is its own part of the producer. Here there
is no network thread: whichever thread finds closed batches — ``send()``, ``poll()``,
``flush()``, a future's ``get()``, or the optional background linger thread — takes the
**send lock** and delivers them (:meth:`Sender.deliver`). Each batch is encoded once
(``kafkasim.records.record_batch.encode_trusted_batch``) with the producer id, epoch and
base sequence, then ``Broker.produce`` is called; :mod:`kafkasim.producer.faults` may
lose the request or the response on the way.

Retries, the in-flight model (numbered):

1. A batch whose attempt fails with a retriable error (``NetworkError`` from fault
   injection, a retriable broker error, or — idempotent only — a sequence gap,
   ``OutOfOrderSequenceNumberError``) waits in its partition's retry list.
2. It is retried after up to ``max_in_flight_requests_per_connection - 1`` later batches
   of its partition were attempted (they were "in flight" with it), or, with ``force``
   (flush, poll, ``get()``, close), once nothing later is left. One in flight → at once.
   Until a partition has acknowledged its first batch from this producer id, an
   idempotent producer keeps one batch in flight there (the broker cannot detect a gap
   for a producer it does not know yet).
3. A batch fails for good after ``retries`` retries, or once ``delivery_timeout_ms`` has
   passed on the clock since it was created, or once ``attempts × retry_backoff_ms``
   reaches ``delivery_timeout_ms`` (a ``KafkaTimeoutError`` naming the last error and the
   time that really passed): without a network, the backoff is *counted*, not slept,
   which bounds retries deterministically. If an idempotent batch fails for good that way (whether
   the broker wrote it is unknown), the queued batches behind it on that partition fail
   with it and the partition's sequence restarts at the failed batch's base sequence
   (Kafka bumps the epoch instead).
4. A batch of two or more records refused with ``RecordTooLargeError`` is **split**, as
   Kafka's Sender does on MESSAGE_TOO_LARGE (``RecordAccumulator.splitAndReenqueue``):
   :meth:`~kafkasim.producer.batch.ProducerBatch.split` cuts it into pieces of at most
   ``batch_size`` or half its size, which go first in the partition's queue, in order,
   with the batch's sequence range (so later batches keep theirs). This is not a retry.
   A single record still too large fails alone; its batch mates are written.
5. A batch the broker refuses with a non-retriable error (too large, invalid record, ...)
   was not written: it fails alone, and with idempotence the later batches of its
   partition give back its sequence numbers (Kafka's ``adjustSequencesDueToFailedBatch``:
   each later base sequence moves down by its record count) and go on.
6. Leader routing: with a broker or cluster that answers ``leader_for`` (metadata), each
   batch goes to its partition's leader (``produce(..., node=leader)``). A
   ``NotLeaderOrFollowerError``, ``LeaderNotAvailableError`` (a failover) or
   ``KafkaStorageError`` (the leader's log directory went offline: Kafka's
   ``KafkaStorageException`` is an ``InvalidMetadataException``) makes the sender
   sleep ``retry_backoff_ms`` on the clock and drop the cached leader, so the retry asks the
   metadata again (Kafka's Sender requesting a metadata update); the retry rules above apply.
7. :meth:`Sender.deliver_until` (``flush(timeout)``) paces the retries on the clock
   instead: each round gives every pending batch at most one attempt, then the sender
   sleeps ``retry_backoff_ms`` on the producer's clock (simulated on a MockClock); it
   gives up at the deadline, leaving the unacknowledged batches pending.

So with idempotence off and more than one request in flight, a failed first attempt lets
later batches land first: Kafka's classic reordering. With idempotence on, the later
batches are rejected by the broker (a sequence gap) and retried in sequence order, and a
batch whose response was lost is recognised as a duplicate and not written twice.

Invariants: per partition, batches are attempted in the order they were closed unless a
retry reorders them (only with idempotence off and more than one in flight), the pieces
of a split batch in its place and order; a batch completes exactly once; sequence
numbers of a partition are contiguous over its acknowledged batches; a record rejected
in ``send()`` never takes a sequence number (sequences are assigned when a batch is
first encoded, here).

Thread-safety: :meth:`Sender.deliver` may be called from any thread; delivery is
serialised by the send lock (re-entrant calls from a callback return at once, the outer
loop delivers). The accumulator is touched only under the producer's lock, passed in.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from typing import Callable, Optional

from kafkasim.clock import Clock
from kafkasim.errors import (
    KafkaSimError, KafkaStorageError, KafkaTimeoutError, LeaderNotAvailableError, NetworkError,
    NotLeaderOrFollowerError, OutOfOrderSequenceNumberError, RecordTooLargeError,
)
from kafkasim.records.record_batch import ATTR_TRANSACTIONAL, encode_trusted_batch
from kafkasim.types import TopicPartition

from kafkasim.producer.accumulator import RecordAccumulator
from kafkasim.producer.batch import ProducerBatch
from kafkasim.producer.faults import LOST_REQUEST, LOST_RESPONSE, FaultInjector

__all__ = ["Sender"]

_INT_MAX = 2**31 - 1
_HALF_RANGE = 2**30     # sequence a is after b iff 0 < (a - b) mod 2**31 < 2**30 (they wrap)
_STALE_METADATA = (NotLeaderOrFollowerError, LeaderNotAvailableError, KafkaStorageError)


class Sender:
    """Delivers the accumulator's closed batches to the broker (see the module docstring)."""

    def __init__(self, broker, acc: RecordAccumulator, lock: threading.Lock, clock: Clock, *,
                 acks: int, idempotent: bool, retries: int, max_in_flight: int,
                 retry_backoff_ms: int, delivery_timeout_ms: int, faults: FaultInjector,
                 metrics: dict, compression: int = 0, txn=None) -> None:
        self._broker = broker
        self._acc = acc
        self._lock = lock                      # the producer's lock: guards the accumulator
        self._clock = clock
        self._acks = acks
        self._idempotent = idempotent
        self._retries = retries
        self._max_in_flight = max_in_flight
        self._retry_backoff_ms = retry_backoff_ms
        self._delivery_timeout_ms = delivery_timeout_ms
        self._faults = faults
        self._m = metrics
        self._compression = compression        # the attributes codec of every batch (compression_type)
        self._txn = txn                        # the TransactionManager of a transactional producer, or None
        self._attributes = ATTR_TRANSACTIONAL if txn is not None else 0
        self._send_lock = threading.RLock()    # delivery to the broker, one thread at a time
        self._sending_thread: Optional[int] = None
        self.producer_id = -1
        self.producer_epoch = -1
        self._next_seq: dict[TopicPartition, int] = {}
        self._acked_once: set[TopicPartition] = set()
        self._retry: dict[TopicPartition, list] = {}      # batches awaiting a retry, per partition
        self._overtaken: dict[TopicPartition, int] = {}   # later batches attempted since the retry
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        # leader routing: a broker (or cluster) that answers metadata gets each batch sent to
        # the partition's leader; a remote broker routes for itself
        self._routed = callable(getattr(broker, "leader_for", None))
        self._leaders: dict[TopicPartition, int] = {}

    def _leader(self, tp: TopicPartition) -> int:
        leader = self._leaders.get(tp)
        if leader is None or leader < 0:
            leader = self._leaders[tp] = self._broker.leader_for(tp.topic, tp.partition)
        return leader

    def set_producer(self, producer_id: int, producer_epoch: int) -> None:
        """The id and epoch of a transactional producer (``init_transactions()``); a new
        epoch restarts every partition's sequence at 0, as Kafka."""
        with self._send_lock:
            if (producer_id, producer_epoch) != (self.producer_id, self.producer_epoch):
                self._next_seq.clear()
                self._acked_once.clear()
            self.producer_id, self.producer_epoch = producer_id, producer_epoch

    @property
    def pending_retries(self) -> int:
        """Batches waiting for a retry."""
        return sum(len(v) for v in self._retry.values())

    # ------------------------------------------------------------------ background linger thread

    def start(self, name: str, linger_ms: int, sends: Callable[[], int]) -> None:
        """Start the background sender (real clocks only); ``sends()`` counts ``send()`` calls."""
        self._thread = threading.Thread(target=self._linger_loop, args=(linger_ms, sends), name=name,
                                        daemon=True)
        self._thread.start()

    def stop(self, timeout: Optional[float]) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _linger_loop(self, linger_ms: int, sends: Callable[[], int]) -> None:
        """Sends batches that lingered while sends were idle.

        While ``send()`` keeps being called it closes lingered batches itself (every append
        checks the clock), so this thread stays out of the way: it only acts after a whole
        period without a send, and never blocks on the send lock.
        """
        period = max(0.001, min(linger_ms, 100) / 1000.0)
        seen = -1
        acc = self._acc
        while not self._stop.wait(period):
            try:
                n = sends()
                if n != seen:
                    seen = n
                    continue
                if acc.open_count():
                    now = self._clock.now_ms()
                    if acc.next_expiry <= now:
                        with self._lock:
                            acc.expire(now)
                if acc.ready or self._retry:
                    self.deliver(block=False, force=True)
            except Exception:  # the futures carry delivery errors; never kill the thread
                pass

    # ------------------------------------------------------------------ delivery

    def wait_batch(self, batch: ProducerBatch, timeout: Optional[float]) -> None:
        """A future's ``get()`` on an unsent batch: send it now instead of waiting for linger."""
        if self._sending_thread == threading.get_ident():
            return
        with self._lock:
            self._acc.close_partition(batch.tp)
        self.deliver(block=True, force=True)

    def deliver(self, block: bool, force: bool = False, _once: Optional[set] = None) -> int:
        """Deliver every ready batch; with ``force`` also every batch awaiting a retry.

        Returns how many batch attempts this call made. ``_once`` (a paced round of
        :meth:`deliver_until`) collects the batches attempted; none is attempted twice
        unless a not-yet-attempted retry of its partition is requeued with it.
        """
        me = threading.get_ident()
        if self._sending_thread == me:        # re-entered from a callback: the outer loop delivers
            return 0
        done = 0
        first = True
        while True:
            if not self._send_lock.acquire(blocking=block):
                return done
            try:
                self._sending_thread = me
                while True:
                    with self._lock:
                        batches = self._acc.drain()
                    if not batches and not (force and self._retry and (_once is None or first)):
                        break
                    first = False
                    done += self._send_batches(batches, force, _once)
            finally:
                self._sending_thread = None
                self._send_lock.release()
            if not self._acc.ready:
                return done

    def deliver_until(self, deadline_ms: int) -> bool:
        """Deliver everything, pacing retries by ``retry_backoff_ms`` on the clock (step 6 of
        the module docstring); True when nothing is left unacknowledged, False at the deadline."""
        clock = self._clock
        while True:
            self.deliver(block=True, force=True, _once=set())
            if not self._retry and not self._acc.ready:
                return True
            now = clock.now_ms()
            if now >= deadline_ms:
                return False
            clock.sleep(min(max(1, self._retry_backoff_ms), deadline_ms - now))

    def abort_pending(self, error: BaseException) -> int:
        """Fail every batch still waiting for a retry or in the ready queue; returns how many."""
        with self._send_lock:
            with self._lock:
                batches = self._acc.drain()
            for retry in self._retry.values():
                batches.extend(retry)
            self._retry.clear()
            for b in batches:
                self._fail(b, error)
            return len(batches)

    def _send_batches(self, batches: list[ProducerBatch], force: bool, once: Optional[set]) -> int:
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
            attempts += self._send_partition(tp, q, force, once)
        return attempts

    def _send_partition(self, tp: TopicPartition, queue: deque, force: bool, once: Optional[set]) -> int:
        """Attempt ``queue`` (new batches of ``tp``, in order), interleaving pending retries
        (steps 1-5 of the module docstring). In a paced round (``once``), a retry already
        attempted this round waits for the next one, and so do the batches behind it."""
        m = self._m
        retry = self._retry.get(tp)
        attempts = 0
        while True:
            width = self._max_in_flight
            if self._idempotent and tp not in self._acked_once:
                width = 1
            if retry and (self._overtaken.get(tp, 0) >= width - 1 or (force and not queue)):
                if once is not None and all(b in once for b in retry):
                    retry.extend(queue)                  # the in-flight window is full this round
                    queue.clear()
                    break
                retry.sort(key=_batch_no)            # retried in their original order
                queue.extendleft(reversed(retry))
                retry = None
                del self._retry[tp]
                self._overtaken[tp] = 0
            if not queue:
                break
            b = queue.popleft()
            if once is not None:
                once.add(b)
            attempts += 1
            err = self._attempt(b)
            if retry is not None and b not in retry:
                self._overtaken[tp] = self._overtaken.get(tp, 0) + 1
            if err is None:
                continue
            if type(err) is RecordTooLargeError and len(b.records) > 1:
                # step 4 of the module docstring (Kafka's Sender on MESSAGE_TOO_LARGE): split,
                # the pieces go first; not a retry; they keep the batch's sequence range
                queue.extendleft(reversed(b.split(self._acc.batch_size)))
                m["batch-split-total"] += 1
                continue
            retriable = self._acks != 0 and (
                err.retriable or (self._idempotent and isinstance(err, OutOfOrderSequenceNumberError)))
            if retriable and b.attempts <= self._retries \
                    and b.attempts * self._retry_backoff_ms < self._delivery_timeout_ms \
                    and self._clock.now_ms() - b.created_ms < self._delivery_timeout_ms:
                m["record-retry-total"] += len(b.records)
                if retry is None:
                    retry = self._retry[tp] = []
                    self._overtaken[tp] = 0
                retry.append(b)
                continue
            if retriable and b.attempts > self._retries:
                final: BaseException = err
            elif retriable:
                final = KafkaTimeoutError(_expiry_message(b, self._clock.now_ms() - b.created_ms,
                                                          self._retry_backoff_ms, self._delivery_timeout_ms, err))
                final.__cause__ = err
            else:
                final = err
            self._fail(b, final)
            if self._idempotent and not retriable:
                # step 5 of the module docstring: refused, so none of it was written; the
                # later batches take its sequence numbers and go on
                self._release_sequences(tp, b, queue, retry)
                continue
            if self._idempotent:
                # whether it was written is unknown (retries ran out): the later batches of this
                # partition cannot be written in sequence, so they fail too
                for later in list(queue) + (retry or []):
                    self._fail(later, final)
                queue.clear()
                self._retry.pop(tp, None)
                retry = None
                self._next_seq[tp] = b.base_sequence
                break
        return attempts

    def _release_sequences(self, tp: TopicPartition, failed: ProducerBatch, queue: deque,
                           retry: Optional[list]) -> None:
        """``failed`` was refused by the broker: give its sequence numbers back (step 5)."""
        n, base = len(failed.records), failed.base_sequence
        if base < 0:              # never sequenced (its encoding failed): nothing to give back
            return
        for later in itertools.chain(queue, retry or ()):
            if later.base_sequence >= 0 and 0 < ((later.base_sequence - base) & _INT_MAX) < _HALF_RANGE:
                later.base_sequence = (later.base_sequence - n) & _INT_MAX
                later.encoded = None          # re-encoded with the new sequence when attempted
        self._next_seq[tp] = (self._next_seq.get(tp, 0) - n) & _INT_MAX

    def _fail(self, b: ProducerBatch, err: BaseException) -> None:
        if not b.done:
            self._m["record-error-total"] += len(b.records)
            b.complete(-1, error=err)
            if self._txn is not None:
                self._txn.on_batch_failed(err)     # the transaction can only be aborted now

    def _attempt(self, b: ProducerBatch) -> Optional[KafkaSimError]:
        """One produce request for ``b``; completes it on success, else returns the error."""
        tp = b.tp
        m = self._m
        if b.encoded is None:
            seq = b.base_sequence       # >= 0 already for a piece of a split or a re-sequenced batch
            if self._idempotent:
                if self.producer_id < 0 and self._txn is None:
                    self.producer_id, self.producer_epoch = self._broker.init_producer_id()
                if seq < 0:
                    seq = self._next_seq.get(tp, 0)
            try:
                # the accumulator's records are well-formed by construction (deltas 0..n-1,
                # every field checked in send()); the broker validates the batch anyway
                b.encoded = encode_trusted_batch(b.records, producer_id=self.producer_id,
                                                 producer_epoch=self.producer_epoch, base_sequence=seq,
                                                 compression=self._compression, attributes=self._attributes)
            except KafkaSimError as exc:
                return exc              # no sequence number taken: the later batches keep theirs
            if self._idempotent and b.base_sequence < 0:
                b.base_sequence = seq
                self._next_seq[tp] = (seq + len(b.records)) & _INT_MAX
            if b.attempts == 0:
                m["batch-total"] += 1
                if b.parent is None:    # a piece's records were counted with the batch it came from
                    m["record-send-total"] += len(b.records)
        b.attempts += 1
        fault = self._faults.fault_for(tp, b.batch_no, b.attempts)
        m["request-total"] += 1
        try:
            if self._txn is not None:     # AddPartitionsToTxn before the transaction's first produce there
                self._txn.ensure_partition_added(tp)
            if fault == LOST_REQUEST:
                m["injected-fault-total"] += 1
                raise self._faults.lost_request(tp, b.batch_no, b.attempts)
            if self._routed:    # to the partition's leader, from the (cached) metadata
                res = self._broker.produce(tp.topic, tp.partition, b.encoded, acks=self._acks,
                                           node=self._leader(tp))
            else:
                res = self._broker.produce(tp.topic, tp.partition, b.encoded, acks=self._acks)
            m["byte-total"] += len(b.encoded)
            if fault == LOST_RESPONSE and self._acks != 0:
                m["injected-fault-total"] += 1
                raise self._faults.lost_response(tp, b.batch_no, b.attempts, res.base_offset)
        except KafkaSimError as exc:
            if self._routed and isinstance(exc, _STALE_METADATA):
                # the leader moved (or is down): back off retry_backoff_ms on the clock, then
                # refresh the metadata before the retry (Kafka's Sender + Metadata)
                self._leaders.pop(tp, None)
                self._clock.sleep(self._retry_backoff_ms)
            elif self._routed and isinstance(exc, NetworkError):
                self._leaders.pop(tp, None)     # a broker that went away: ask the metadata again
            if self._acks == 0:        # fire and forget: the producer never hears about it
                b.complete(-1)
                return None
            return exc
        if res.duplicate:
            m["duplicate-batch-total"] += 1
        self._acked_once.add(tp)
        b.complete(-1 if self._acks == 0 else res.base_offset, res.log_append_time, res.log_start_offset)
        return None


def _expiry_message(b: ProducerBatch, elapsed_ms: int, backoff_ms: int, timeout_ms: int,
                    err: BaseException) -> str:
    """Why a batch expired, in true numbers (step 3 of the module docstring): Kafka's words
    when ``delivery.timeout.ms`` has really passed on the clock, else what was counted
    (attempts × ``retry.backoff.ms``) and the time that really passed."""
    last = f"last error: {type(err).__name__}: {err}"
    if elapsed_ms >= timeout_ms:
        return (f"Expiring {len(b.records)} record(s) for {b.tp}:{elapsed_ms} ms has passed since batch "
                f"creation (delivery.timeout.ms {timeout_ms}; after {b.attempts} attempts; {last})")
    return (f"Expiring {len(b.records)} record(s) for {b.tp}: {b.attempts} attempts x retry.backoff.ms "
            f"{backoff_ms} reached delivery.timeout.ms {timeout_ms} after {elapsed_ms} ms since batch "
            f"creation (retries are counted, not slept, when no time passes between them; {last})")


def _batch_no(b: ProducerBatch) -> tuple:
    return b.batch_no, b.split_path
