"""kafkasim.coordinator: the group coordinator (classic protocol) and its offsets store.

Modules: ``group`` (group/member data), ``offsets_store`` (persistence on storage
logs), ``coordinator`` (``GroupCoordinator``: the state and shared checks; its docstring
is the protocol), and the requests by job: ``rebalance`` (join/sync/heartbeat/leave, the
state machine), ``commits`` (offset commit/fetch), ``admin`` (list/describe/delete); and the
transaction coordinator: ``txn_metadata`` (one transactional id's states and transitions) and
``transactions`` (``TransactionCoordinator``, pure: it returns the records to persist and the
markers to write). Kafka 4's consumer groups (KIP-848), beside the classic ones and pure (no
broker or wire yet): ``consumer_group`` (group, member, epochs, states), ``reconciliation``
(one member towards its target), ``target_assignment`` (the server assignor's call),
``consumer_group_config`` (``group.consumer.*``) and ``consumer_heartbeat``
(``ConsumerGroupCoordinator``: the heartbeat and the timers; its docstring is the protocol). The pure
parts it shares with clients live below it: the message shapes in
:mod:`kafkasim.protocol.group`, the ``__consumer_offsets`` schema in
:mod:`kafkasim.protocol.offsets`, the assignors in :mod:`kafkasim.assignors`.
Nothing here imports the broker. Exports are lazy.
"""

from kafkasim._lazy import lazy_exports

_EXPORTS = {name: "kafkasim.coordinator.coordinator" for name in (
    "GroupCoordinator", "GroupState", "JoinResult", "SyncResult", "PENDING", "COMPLETE",
    "NO_GENERATION", "NO_MEMBER_ID")}
_EXPORTS["OffsetsStore"] = "kafkasim.coordinator.offsets_store"
_EXPORTS.update({name: "kafkasim.coordinator.consumer_heartbeat" for name in ("ConsumerGroupCoordinator", "Fenced")})
_EXPORTS.update({name: "kafkasim.coordinator.consumer_group" for name in (
    "ConsumerGroup", "ConsumerGroupMember", "ConsumerGroupState", "MemberState", "TopicMetadata")})
_EXPORTS.update({name: "kafkasim.coordinator.transactions" for name in (
    "TransactionCoordinator", "Persist", "WriteMarkers", "InitProducerIdResult", "AddPartitionsResult",
    "EndTxnResult", "TxnStep")})
_EXPORTS.update({name: "kafkasim.coordinator.txn_metadata" for name in (
    "TxnState", "TransactionMetadata", "TxnTransitMetadata")})
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
