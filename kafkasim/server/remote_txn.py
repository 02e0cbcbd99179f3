"""The transaction admin calls of :class:`kafkasim.server.remote.RemoteBroker`, as a mixin over
:class:`~kafkasim.server.remote_conn.RemoteConnection`: what ``kafkasim transactions`` calls.

=====================================  =================================================
Broker call                            Kafka requests
=====================================  =================================================
describe_transactions                  DescribeTransactions
list_transactions                      ListTransactions
describe_producers                     DescribeProducers (to the leader, or to ``node``)
write_txn_marker                       WriteTxnMarkers (to the partition's leader)
=====================================  =================================================

The answers are the in-process broker's types (:class:`~kafkasim.coordinator.transactions.TransactionDescription`,
:class:`~kafkasim.coordinator.transactions.ListTransactionsResult`,
:class:`~kafkasim.broker.producer_state.ProducerState`), so a command reads them alike in both modes.

Thread-safety: as the connection (one lock serialises the exchanges).
"""

from __future__ import annotations

from typing import Iterable, Optional

from kafkasim.broker.producer_state import ProducerState
from kafkasim.coordinator.transactions import ListTransactionsResult, TransactionDescription, TransactionListing
from kafkasim.errors import InvalidArgumentError, for_code
from kafkasim.types import TopicPartition
from kafkasim.server.remote_conn import _code, _raise

__all__ = ["TxnAdminCalls"]


class TxnAdminCalls:
    """Transaction admin calls over the wire (mixin; needs ``_call``, ``_leader_call``, ``_peer``)."""

    def describe_transactions(self, transactional_ids: Iterable[str]) -> list[TransactionDescription]:
        answer = self._call(65, {"transactional_ids": list(transactional_ids)})
        out = []
        for s in answer.transaction_states:
            code = _code(s.error_code)
            if code:
                cls = for_code(code)
                out.append(TransactionDescription(s.transactional_id, cls(
                    f"{cls.description} (transactional id {s.transactional_id!r})")))
                continue
            out.append(TransactionDescription(
                s.transactional_id, None, s.transaction_state, int(s.producer_id), int(s.producer_epoch),
                int(s.transaction_timeout), int(s.transaction_start_time),
                tuple(TopicPartition(t.topic, p) for t in s.topics for p in t.partitions)))
        return out

    def list_transactions(self, states_filter: Iterable[str] = (), producer_id_filter: Iterable[int] = (),
                          duration_filter_ms: int = -1) -> ListTransactionsResult:
        answer = self._call(66, {"state_filters": list(states_filter),
                                 "producer_id_filters": [int(p) for p in producer_id_filter],
                                 "duration_filter": duration_filter_ms})
        _raise(answer.error_code, None, "ListTransactions")
        return ListTransactionsResult(
            tuple(TransactionListing(t.transactional_id, int(t.producer_id), t.transaction_state)
                  for t in answer.transaction_states),
            tuple(answer.unknown_state_filters))

    def describe_producers(self, topic: str, partition: int, *, node: Optional[int] = None) -> list[ProducerState]:
        request = {"topics": [{"name": topic, "partition_indexes": [partition]}]}
        if node is None:
            (answer,) = self._leader_call(topic, [partition], 61, lambda ps: request)
        else:
            meta = self._call(3, {"topics": [], "allow_auto_topic_creation": False})
            nodes = {b.node_id: (b.host, b.port) for b in meta.brokers}
            if node not in nodes:
                raise InvalidArgumentError(f"broker {node} is not in the cluster (brokers {sorted(nodes)})")
            answer = self._peer(nodes[node])._call(61, request)
        p = answer.topics[0].partitions[0]
        _raise(p.error_code, p.error_message, f"{topic}-{partition}")
        return [ProducerState(int(s.producer_id), int(s.producer_epoch), int(s.last_sequence), int(s.last_timestamp),
                              int(s.coordinator_epoch), int(s.current_txn_start_offset))
                for s in p.active_producers]

    def write_txn_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                         coordinator_epoch: int, commit: bool = False, *, node: Optional[int] = None) -> None:
        (answer,) = self._leader_call(topic, [partition], 27, lambda ps: {"markers": [{
            "producer_id": producer_id, "producer_epoch": producer_epoch, "transaction_result": bool(commit),
            "coordinator_epoch": coordinator_epoch,
            "topics": [{"name": topic, "partition_indexes": [partition]}]}]})
        p = answer.markers[0].topics[0].partitions[0]
        _raise(p.error_code, None, f"{'COMMIT' if commit else 'ABORT'} marker of producer {producer_id} "
                                   f"on {topic}-{partition}")
