"""The broker's producer-state admin: DescribeProducers and WriteTxnMarkers.

:class:`ProducersApi` is one of the parts of :class:`kafkasim.broker.broker.Broker` (state
and lookups in :class:`~kafkasim.broker.core.BrokerCore`). It serves what Kafka's
``kafka-transactions.sh`` needs beyond the transaction coordinator:

- :meth:`ProducersApi.describe_producers`: the active producers of one partition replica
  (:func:`kafkasim.broker.producer_state.active_producers`, a fold over the replica's log
  from its start: producer id, epoch, last sequence, last timestamp, coordinator epoch of
  the latest marker, start offset of the open transaction), as Kafka's DescribeProducers
  answers from the partition's ``ProducerStateManager``. Any replica answers (``node``);
  by default the leader's;
- :meth:`ProducersApi.write_txn_marker`: one COMMIT or ABORT marker written on the
  partition leader for a producer, as a WriteTxnMarkers request does. Kafka's coordinator
  sends it; ``Admin.abortTransaction`` sends it too, to abort a *hanging* transaction
  (one the coordinator no longer knows). The marker is checked as Kafka's
  ``ProducerAppendInfo.appendEndTxnMarker`` checks it: an epoch older than the producer's
  is INVALID_PRODUCER_EPOCH, a coordinator epoch older than the one of the producer's latest
  marker is TRANSACTION_COORDINATOR_FENCED. The transaction coordinator's own state is not
  touched (as in Kafka).

Kafka keeps the producer state in memory and in ``.snapshot`` files; kafkasim reads it from
the log on each call, so it costs a walk over the partition's batch headers.

Thread-safety: both calls run under the partition's lock, as produce does.
"""

from __future__ import annotations

from typing import Optional

from kafkasim.arguments import check_arg
from kafkasim.errors import InvalidProducerEpochError, NotLeaderOrFollowerError, TransactionCoordinatorFencedError

from kafkasim.broker.core import BrokerCore
from kafkasim.broker.producer_state import ProducerState, active_producers

__all__ = ["ProducersApi"]

_READ_BYTES = 8 * 1024 * 1024


def _all_batches(log):
    """``(header, bytes)`` of every batch of ``log`` from its start, oldest first."""
    offset, end = log.log_start_offset, log.log_end_offset
    while offset < end:
        batches = log.read_batches(offset, _READ_BYTES)
        if not batches:
            return
        yield from batches
        offset = batches[-1][0].next_offset


class ProducersApi(BrokerCore):
    """DescribeProducers and WriteTxnMarkers (see the module docstring)."""

    def describe_producers(self, topic: str, partition: int, *, node: Optional[int] = None) -> list[ProducerState]:
        """The active producers of ``topic``-``partition`` on broker ``node``'s replica (default:
        the leader's), sorted by producer id. UNKNOWN_TOPIC_OR_PARTITION for a partition that
        does not exist; NOT_LEADER_OR_FOLLOWER when ``node`` hosts no replica of it."""
        part = self._checked_partition(topic, partition)
        if node is not None:
            check_arg("node", node, "int")
            self._check_node(node)
        with part.lock:
            if node is None:
                log = part.leader_log(None)
            elif node in part.hosted:
                log = part.hosted[node].log
            else:
                raise NotLeaderOrFollowerError(
                    f"broker {node} hosts no replica of {topic}-{partition} (replicas {part.replicas})")
            return active_producers(_all_batches(log), log.open_transactions, where=f"{topic}-{partition}")

    def write_txn_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                         coordinator_epoch: int, commit: bool = False, *, node: Optional[int] = None) -> int:
        """Write a COMMIT (``commit``) or ABORT marker for ``producer_id`` on the partition
        leader; returns its offset. Checked as Kafka checks a marker (module docstring)."""
        for name, value in (("producer_id", producer_id), ("producer_epoch", producer_epoch),
                            ("coordinator_epoch", coordinator_epoch)):
            check_arg(name, value, "int")
        part = self._checked_partition(topic, partition)
        if node is not None:
            self._check_node(node)
        where = f"{topic}-{partition}"
        with part.lock:
            log = part.leader_log(node)
            current = {p.producer_id: p for p in active_producers(_all_batches(log), {}, where=where)}
            state = current.get(producer_id)
            if state is not None and producer_epoch < state.producer_epoch:
                raise InvalidProducerEpochError(
                    f"Epoch of producer {producer_id} at offset {log.log_end_offset} in {where} is "
                    f"{producer_epoch}, which is smaller than the last seen epoch {state.producer_epoch}")
            if state is not None and state.coordinator_epoch > coordinator_epoch:
                raise TransactionCoordinatorFencedError(
                    f"Invalid coordinator epoch for producerId {producer_id} at offset {log.log_end_offset} "
                    f"in partition {where}: {coordinator_epoch} (zombie), {state.coordinator_epoch} (current)")
            written = log.append_control(producer_id, producer_epoch, bool(commit), coordinator_epoch,
                                         part.leader_epoch)
            part.producer_table().on_marker(producer_id, producer_epoch)     # a higher epoch becomes the producer's
        return written.base_offset
