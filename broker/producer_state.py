"""Broker-side idempotent-producer state for one partition (Kafka's ProducerStateManager).

For each producer id the state keeps the current epoch and the metadata of the
last :data:`MAX_CACHED_BATCHES` (5, as Kafka) batches appended: first/last sequence
and base offset. :meth:`ProducerStateTable.check` decides, before an append, whether a
batch is new, a duplicate of a recent batch (a retry: the caller returns the
original offset and writes nothing), or illegal:

1. ``producer_id < 0``: not idempotent, always new.
2. epoch older than the stored epoch → :class:`InvalidProducerEpochError`.
3. epoch newer than the stored epoch → the sequence must restart at 0, else
   :class:`OutOfOrderSequenceNumberError`; the producer's cached batches are dropped.
4. same epoch: a batch whose (first, last) sequence equals a cached batch's is a
   duplicate; otherwise its first sequence must be the last appended sequence + 1
   (wrapping at 2^31-1 to 0, as Kafka), else :class:`OutOfOrderSequenceNumberError`.
5. unknown producer id: any sequence is accepted (Kafka ≥ 2.5 behaves alike when a
   producer's state has expired; kafkasim keeps the state only in memory and
   rebuilds it from the active segment on first use after a restart).

A COMMIT/ABORT marker with a higher epoch than the producer's (KIP-890 TV2 bumps the epoch
at every EndTxn and writes its markers with the new one) makes that epoch the producer's,
with no batches kept, as Kafka's ``appendEndTxnMarker``: the old epoch is then refused (2.)
and the new one starts at sequence 0 (4.) (:meth:`ProducerStateTable.on_marker`).

Not thread-safe: the broker calls it under the partition's produce lock.

:func:`active_producers` is the other view of the same state, the one Kafka's
DescribeProducers and ``kafka-transactions.sh describe-producers`` show: for every producer
id that wrote to the partition, its latest epoch, last sequence, last timestamp, the
coordinator epoch of its latest marker and the start offset of its open transaction. It is
a pure fold over the partition's batches, oldest first.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Iterable, Optional

from kafkasim.errors import InvalidProducerEpochError, OutOfOrderSequenceNumberError
from kafkasim.records.control import read_control_batch
from kafkasim.records.framing import ATTR_CONTROL
from kafkasim.records.record_batch import BatchHeader

__all__ = ["ProducerStateTable", "MAX_CACHED_BATCHES", "ProducerState", "active_producers"]

MAX_CACHED_BATCHES = 5
_INT32_MAX = 2**31 - 1


@dataclass
class _ProducerEntry:
    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=MAX_CACHED_BATCHES))
    # each cached batch: (first_seq, last_seq, base_offset)

    @property
    def last_seq(self) -> Optional[int]:
        return self.batches[-1][1] if self.batches else None


def _last_seq_of(h: BatchHeader) -> int:
    # sequences wrap like Kafka's DefaultRecordBatch.incrementSequence
    return (h.base_sequence + h.last_offset_delta) % (_INT32_MAX + 1)


class ProducerStateTable:
    """Idempotence state of one partition: producer id → epoch and recent batches."""

    def __init__(self, partition_name: str) -> None:
        self._name = partition_name
        self._producers: dict[int, _ProducerEntry] = {}

    def check(self, h: BatchHeader) -> Optional[int]:
        """Return the original base offset if ``h`` duplicates a recent batch, None if new.

        Raises InvalidProducerEpochError or OutOfOrderSequenceNumberError (see module doc).
        """
        if h.producer_id < 0:
            return None
        entry = self._producers.get(h.producer_id)
        if entry is None:
            return None
        if h.producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"Epoch of producer {h.producer_id} at {self._name} is {h.producer_epoch}, "
                f"which is smaller than the last seen epoch {entry.epoch}")
        if h.producer_epoch > entry.epoch:
            if h.base_sequence != 0:
                raise OutOfOrderSequenceNumberError(
                    f"Invalid sequence number for new epoch {h.producer_epoch} of producer "
                    f"{h.producer_id} at {self._name}: {h.base_sequence} (request epoch), 0 (expected)")
            return None
        last = _last_seq_of(h)
        for first_seq, last_seq, base_offset in entry.batches:
            if first_seq == h.base_sequence and last_seq == last:
                return base_offset
        expected = 0 if entry.last_seq is None else (entry.last_seq + 1) % (_INT32_MAX + 1)
        if h.base_sequence != expected:
            raise OutOfOrderSequenceNumberError(
                f"Out of order sequence number for producer {h.producer_id} at {self._name}: "
                f"{h.base_sequence} (incoming seq. number), {entry.last_seq} (current end sequence number)")
        return None

    def update(self, h: BatchHeader) -> None:
        """Record an appended batch (``h`` carries its assigned base offset)."""
        if h.producer_id < 0:
            return
        entry = self._producers.get(h.producer_id)
        if entry is None or h.producer_epoch > entry.epoch:
            entry = self._producers[h.producer_id] = _ProducerEntry(h.producer_epoch)
        entry.batches.append((h.base_sequence, _last_seq_of(h), h.base_offset))

    def on_marker(self, producer_id: int, epoch: int) -> None:
        """A COMMIT/ABORT marker of ``producer_id`` written at ``epoch``: a higher epoch than
        the known one becomes the producer's, with no batches (an unknown producer stays unknown)."""
        entry = self._producers.get(producer_id)
        if entry is not None and epoch > entry.epoch:
            self._producers[producer_id] = _ProducerEntry(epoch)

    def load(self, headers: Iterable[BatchHeader]) -> None:
        """Rebuild from the headers of appended batches (markers included), oldest first."""
        for h in headers:
            if h.attributes & ATTR_CONTROL:
                self.on_marker(h.producer_id, h.producer_epoch)
            elif h.producer_id >= 0 and h.base_sequence >= 0:
                entry = self._producers.get(h.producer_id)
                if entry is not None and h.producer_epoch < entry.epoch:
                    continue
                self.update(h)

    def producer_ids(self) -> list[int]:
        return sorted(self._producers)


@dataclass(frozen=True)
class ProducerState:
    """One active producer of a partition, as DescribeProducers reports it (Kafka's
    ``ProducerState``): -1 where Kafka answers -1 (no data batch yet: ``last_sequence``; no
    marker yet: ``coordinator_epoch``; no open transaction: ``current_txn_start_offset``)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int = -1
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_start_offset: int = -1


def active_producers(batches: Iterable[tuple[BatchHeader, bytes]], open_transactions: dict[int, int],
                     where: str = "<log>") -> list[ProducerState]:
    """The producers of a partition from its batches (``(header, bytes)`` oldest first, as
    :meth:`kafkasim.storage.log.Log.read_batches` gives them) and its open transactions
    (``producer id -> first offset``), sorted by producer id.

    As Kafka's ``ProducerAppendInfo``: a data batch of a newer epoch starts the entry afresh;
    a data batch sets the last sequence (base sequence + last offset delta) and the last
    timestamp (the batch's max timestamp); a COMMIT/ABORT marker sets the coordinator epoch
    and the last timestamp and leaves the sequence. Worked example: producer 7 writes a
    transactional batch of 3 records (sequences 0..2) at offset 10 and its ABORT marker
    (coordinator epoch 0) at offset 13, then one more batch (sequence 3) at offset 14 that
    is still open → ``ProducerState(7, 0, last_sequence=3, coordinator_epoch=0,
    current_txn_start_offset=14, last_timestamp=<batch 14's max timestamp>)``.
    """
    entries: dict[int, dict] = {}
    for h, raw in batches:
        if h.producer_id < 0:
            continue
        e = entries.get(h.producer_id)
        if e is None or h.producer_epoch > e["producer_epoch"]:
            e = entries[h.producer_id] = {"producer_epoch": h.producer_epoch, "last_sequence": -1,
                                          "last_timestamp": -1,
                                          "coordinator_epoch": -1 if e is None else e["coordinator_epoch"]}
        if h.attributes & ATTR_CONTROL:
            control = read_control_batch(raw, 0, h, where=where)
            if control is not None and control[1] is not None:
                e["coordinator_epoch"] = control[1].coordinator_epoch
        elif h.base_sequence >= 0:
            e["last_sequence"] = _last_seq_of(h)
        e["last_timestamp"] = h.max_timestamp
    return [ProducerState(pid, current_txn_start_offset=open_transactions.get(pid, -1), **e)
            for pid, e in sorted(entries.items())]
