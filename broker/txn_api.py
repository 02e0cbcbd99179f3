"""The broker's transaction API: the transaction coordinator, its state topic, and the markers.

:class:`TxnApi` is one of the parts of :class:`kafkasim.broker.broker.Broker` (state and
lookups in :class:`~kafkasim.broker.core.BrokerCore`). The coordinator
(:mod:`kafkasim.coordinator.transactions`) is a pure state machine; this part does what it
asks (its ``Persist`` and ``WriteMarkers`` effects, the loop of its module docstring):

- **state**: each transition is written to ``__transaction_state`` (50 partitions,
  compacted, as Kafka; Kafka's record bytes, :mod:`kafkasim.coordinator.txn_store`) before
  the call answers; on first use the topic is replayed and the markers of transactions
  found in PrepareCommit/PrepareAbort are written again, so a transaction the coordinator
  decided completes after a restart;
- **markers**: a COMMIT or ABORT control batch (:meth:`kafkasim.storage.log.Log.append_control`)
  on every partition of the transaction, stamped with the partition's leader epoch; on
  ``__consumer_offsets`` partitions the group offsets the transaction committed
  (TxnOffsetCommit, already in that log as the producer's transactional records) are
  applied on COMMIT and dropped on ABORT. Markers are written as acks=all (on the ISR before
  they count). A partition with no leader (offline, in a cluster) keeps its marker pending, retried by every :meth:`TxnApi.tick_transactions` until it is
  written; EndTxn has answered already (as Kafka, whose marker channel waits for the leader);
- **produce**: a transactional batch is accepted only from the producer id and epoch of an
  Ongoing transaction that added the partition (Kafka's verification, KIP-890 part 1;
  INVALID_TXN_STATE otherwise);
- **time**: :meth:`TxnApi.tick_transactions` runs the coordinator's periodic tasks (abort
  transactions past ``transaction.timeout.ms``, expire idle transactional ids) on the
  broker's clock; the broker's maintenance calls it;
- **transaction versions** (KIP-890): the ``transaction.version`` feature (supported 0–2,
  finalized at 2 by default, as ``kafka-storage.sh format`` finalizes it for a new Kafka 4.0
  cluster; :meth:`TxnApi.update_features` is ``kafka-features.sh upgrade/downgrade``) is what
  ApiVersions tells clients, and the version of the aborts the coordinator starts itself
  (fence, timeout). A client's own requests carry their version, as in Kafka: EndTxn v5 is
  TV2 (the epoch is bumped on every commit and abort, and the answer carries the epoch to
  use next), and a TV2 client's Produce v12+ / TxnOffsetCommit v5+ add their partition to
  the transaction themselves (:meth:`TxnApi.add_partitions_on_append`, Kafka's
  ``AddPartitionsToTxnManager`` with ``addPartition``) instead of AddPartitionsToTxn /
  AddOffsetsToTxn.

Thread-safety: every call runs under the coordinator's own lock (``_txn_lock``); marker
writes take each partition's lock as produce does.
"""

from __future__ import annotations

import threading
from typing import Callable, Iterable, Mapping, Optional

from kafkasim.arguments import check_arg, check_commit_offsets
from kafkasim.errors import (
    CoordinatorNotAvailableError, InvalidProducerEpochError, InvalidTxnStateError, InvalidUpdateVersionError,
    KafkaSimError, ProducerFencedError,
)
from kafkasim.protocol.offsets import OFFSETS_TOPIC
from kafkasim.protocol.txn_log import TRANSACTION_STATE_TOPIC
from kafkasim.records.framing import ATTR_TRANSACTIONAL, BatchHeader
from kafkasim.types import TopicPartition

from kafkasim.broker.core import BrokerCore
from kafkasim.broker.metadata import DEFAULT_FEATURE_LEVELS, SUPPORTED_FEATURES, TRANSACTION_VERSION_FEATURE

__all__ = ["TxnApi", "TRANSACTION_VERSION_FEATURE", "SUPPORTED_FEATURES", "DEFAULT_FEATURE_LEVELS",
           "UPGRADE_TYPES", "CRASH_POINTS"]

UPGRADE_TYPES = ("upgrade", "safe_downgrade", "unsafe_downgrade")
"""Kafka's ``FeatureUpdate.UpgradeType`` (UpdateFeatures' ``upgrade_type`` 1, 2, 3)."""
_TV2 = 2

CRASH_POINTS = ("txn.after_prepare_commit", "txn.after_first_commit_marker")
"""Where :attr:`TxnApi.crash_hook` is called: after PrepareCommit is persisted to
``__transaction_state`` and before any marker is written; after the first partition's COMMIT
marker is written and before the others. A test hook: ``kafkasim serve`` installs one that
ends the process (``os._exit``) when ``KAFKASIM_CRASH_POINT`` names the point, so a crash
test can SIGKILL-equivalently stop the broker exactly there (tests/server/test_txn_crashes.py)."""


class TxnApi(BrokerCore):
    """InitProducerId (transactional), AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
    TxnOffsetCommit, DescribeTransactions, ListTransactions (see the module docstring)."""

    crash_hook: Optional[Callable[[str], None]] = None
    """Test hook: called with each :data:`CRASH_POINTS` name as the markers are written (None:
    nothing is called). Only ``kafkasim serve`` sets it, from ``KAFKASIM_CRASH_POINT``."""

    @property
    def transaction_coordinator(self):
        """The transaction coordinator, created on first use: creates ``__transaction_state``
        if missing, replays it and completes the transactions it finds prepared."""
        coord = self.__dict__.get("_txn_coordinator")
        if coord is not None:
            return coord
        from kafkasim.coordinator.transactions import TransactionCoordinator
        from kafkasim.coordinator.txn_store import TxnStateStore
        from kafkasim.protocol.txn_log import (
            TRANSACTION_STATE_TOPIC, TRANSACTION_STATE_TOPIC_CONFIGS, TRANSACTION_STATE_TOPIC_PARTITIONS)
        with self._lock:
            if self._closed:
                raise CoordinatorNotAvailableError(f"broker over {self.data_dir} is closed")
            coord = self.__dict__.get("_txn_coordinator")
            if coord is None:
                if TRANSACTION_STATE_TOPIC not in self._topics:
                    self.create_topic(TRANSACTION_STATE_TOPIC, TRANSACTION_STATE_TOPIC_PARTITIONS, 1,
                                      TRANSACTION_STATE_TOPIC_CONFIGS)
                n = self._topics[TRANSACTION_STATE_TOPIC].partitions
                store = TxnStateStore([self.log(TRANSACTION_STATE_TOPIC, p) for p in range(n)])
                cfg = self.broker_config
                coord = TransactionCoordinator(
                    self.clock, lambda: self.init_producer_id()[0],
                    transaction_max_timeout_ms=cfg["transaction.max.timeout.ms"],
                    transactional_id_expiration_ms=cfg["transactional.id.expiration.ms"],
                    abort_timed_out_interval_ms=cfg["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
                    remove_expired_interval_ms=cfg["transaction.remove.expired.transaction.cleanup.interval.ms"],
                    transaction_version=self._feature_levels()[TRANSACTION_VERSION_FEATURE])
                self._txn_store = store
                self._txn_lock = threading.RLock()
                self._txn_offsets: dict[str, dict[str, dict[TopicPartition, object]]] = {}
                self._txn_markers_pending: dict[str, tuple] = {}   # tid -> (WriteMarkers, partitions left)
                resend = coord.load(store.load())
                self._restore_txn_offsets(coord)
                self._txn_coordinator = coord
                for markers in resend:
                    self._write_markers(markers)
        return coord

    def _restore_txn_offsets(self, coord) -> None:
        """The group offsets of transactions still open or prepared at load (TxnOffsetCommit
        wrote them to ``__consumer_offsets`` as the producer's transactional records; their
        marker is not written yet), so the transaction's marker applies or drops them."""
        pending = self.group_coordinator.pending_txn_offsets
        for tid in sorted(coord._txns):
            md = coord._txns[tid]
            if md.state.name in ("ONGOING", "PREPARE_COMMIT", "PREPARE_ABORT") and md.producer_id in pending:
                self._txn_offsets[tid] = {g: dict(offsets) for g, offsets in pending[md.producer_id].items()}

    # -- features (KIP-584; transaction.version is KIP-890's) ---------------------------------------
    def _feature_levels(self) -> dict:
        """The finalized levels (loaded with the data dir's metadata, ``meta/features.json``)."""
        return self._finalized_levels

    @property
    def supported_features(self) -> dict:
        """``{feature: (min level, max level)}`` this broker supports (ApiVersions' SupportedFeatures)."""
        return dict(SUPPORTED_FEATURES)

    @property
    def finalized_features(self) -> dict:
        """``{feature: level}`` of the features finalized above level 0, as ApiVersions'
        FinalizedFeatures lists them (a feature at level 0 is not listed, as in Kafka)."""
        return {name: level for name, level in sorted(self._feature_levels().items()) if level > 0}

    @property
    def finalized_features_epoch(self) -> int:
        """The epoch of the finalized features (0, then + 1 on every change); clients keep the
        features of the highest epoch they have seen."""
        return self._finalized_features_epoch

    def update_features(self, levels: Mapping[str, int], *, upgrade_types: Optional[Mapping[str, str]] = None,
                        validate_only: bool = False) -> None:
        """Set finalized feature levels, as ``kafka-features.sh upgrade/downgrade --feature
        transaction.version=1`` (UpdateFeatures) does: all or none. ``upgrade_types`` names each
        feature's :data:`UPGRADE_TYPES` entry (default ``"upgrade"``, which may not lower a
        level); level 0 removes the feature from the finalized ones. INVALID_UPDATE_VERSION for
        an unknown feature or upgrade type, a level outside :data:`SUPPORTED_FEATURES`, or a
        downgrade asked as an upgrade. ``validate_only``: check, change nothing. The levels
        and their epoch are written to ``meta/features.json`` (storage/FORMAT.md §1.3) before
        they apply, so a restarted broker keeps them; a data dir without the file has
        :data:`DEFAULT_FEATURE_LEVELS` at epoch 0."""
        check_arg("levels", levels, "mapping", what="a mapping of feature name to level")
        types = dict(check_arg("upgrade_types", upgrade_types, "mapping", none_ok=True,
                               what="a mapping of feature name to upgrade type") or {})
        with self._lock:
            current = self._feature_levels()
            for name, level in sorted(levels.items()):
                def invalid(why: str) -> InvalidUpdateVersionError:
                    return InvalidUpdateVersionError(f"Invalid update version {level!r} for feature {name}. {why}")
                kind = types.get(name, "upgrade")
                if kind not in UPGRADE_TYPES:
                    raise invalid(f"The upgrade type {kind!r} is not one of {', '.join(UPGRADE_TYPES)}.")
                if name not in SUPPORTED_FEATURES:
                    raise invalid(f"The broker does not support the feature (supported: "
                                  f"{', '.join(sorted(SUPPORTED_FEATURES))}).")
                lo, hi = SUPPORTED_FEATURES[name]
                if isinstance(level, bool) or not isinstance(level, int) or not lo <= level <= hi:
                    raise invalid(f"Broker {self.broker_id} only supports versions {lo}-{hi}.")
                if level < current.get(name, 0) and kind == "upgrade":
                    raise invalid("Can't downgrade the version of this feature without setting the upgrade type "
                                  "to either safe or unsafe downgrade.")
            if validate_only:
                return
            epoch = self.finalized_features_epoch + 1
            self._meta.save_features({**current, **levels}, epoch)      # durable first, as Kafka's metadata log
            current.update(levels)
            self._finalized_features_epoch = epoch
            coord = self.__dict__.get("_txn_coordinator")
            if coord is not None:
                coord.transaction_version = current[TRANSACTION_VERSION_FEATURE]

    # -- the effects loop (coordinator/transactions.py's docstring) ---------------------------
    def _drive(self, result):
        """Persist what ``result`` asks, answer with the final result, write its markers."""
        coord = self.transaction_coordinator
        while result.persist is not None:
            p = result.persist
            try:
                self._txn_store.write(p.transactional_id, p.value, self.clock.now_ms())
            except KafkaSimError as exc:
                result = coord.persisted(p, exc)
            else:
                result = coord.persisted(p)
        if result.markers is not None:
            self._write_markers(result.markers)
        return result

    def _write_markers(self, markers, partitions=None) -> None:
        """A marker on every partition of the transaction (``partitions``: those still without
        one), then Complete* persisted. A partition with no leader now (offline) keeps its
        marker pending: :meth:`tick_transactions` retries it, and the transaction completes
        once every marker is written (Kafka's marker channel waits for the leader the same
        way; meanwhile the id answers CONCURRENT_TRANSACTIONS). A marker is written as an
        acks=all produce is (``PartitionState.append_as_leader``): copied to the ISR before it
        counts, so a leader change cannot lose it; a retriable failure (no leader, the ISR
        below ``min.insync.replicas``) also leaves it pending."""
        coord = self.transaction_coordinator
        hook = self.crash_hook if markers.commit and partitions is None else None
        if hook is not None:
            hook("txn.after_prepare_commit")
        left = set()
        for tp in sorted(markers.partitions if partitions is None else partitions):
            part = self._partition(tp.topic, tp.partition) if tp.topic in self._topics else None
            if part is None:
                continue                              # the topic was deleted meanwhile
            with part.lock:
                try:
                    log = part.leader_log(None)

                    def append(_batch, leader_epoch, log=log):
                        return log.append_control(markers.producer_id, markers.producer_epoch, markers.commit,
                                                  markers.coordinator_epoch, leader_epoch)

                    # acks=all, as Kafka's WriteTxnMarkers: on the ISR before it counts as written
                    part.append_as_leader(None, None, -1, log.config.min_insync_replicas, append)
                    part.producer_table().on_marker(markers.producer_id, markers.producer_epoch)
                except KafkaSimError as exc:
                    if not exc.retriable:
                        raise
                    left.add(tp)             # no leader, too small an ISR: retried by tick_transactions
                    continue
            if hook is not None:
                hook("txn.after_first_commit_marker")
                hook = None
        if not any(tp.topic == OFFSETS_TOPIC for tp in left):   # the group's marker is written
            offsets = self._txn_offsets.pop(markers.transactional_id, {})
            if markers.commit:
                for group_id, committed in sorted(offsets.items()):
                    self._txn_commit_offsets(group_id, committed)
        if left:
            self._txn_markers_pending[markers.transactional_id] = (markers, left)
            return
        self._txn_markers_pending.pop(markers.transactional_id, None)
        step = coord.complete(markers.transactional_id)
        self._drive(step)

    def _txn_commit_offsets(self, group_id: str, committed: dict) -> None:
        """Apply a committed transaction's group offsets (written as the group's own commit)."""
        gc = self.group_coordinator
        with gc._lock:
            now = self.clock.now_ms()
            g = gc._group(group_id)
            if g is None:
                from kafkasim.coordinator.group import Group
                g = gc._groups[group_id] = Group(group_id, state_timestamp_ms=now)
            for tp, om in committed.items():      # (the log has them: the transactional records + marker)
                g.offsets[tp] = (om, now)

    # -- requests ------------------------------------------------------------------------------
    def init_transactional_producer_id(self, transactional_id: str, transaction_timeout_ms: int = 60_000, *,
                                       producer_id: int = -1, producer_epoch: int = -1,
                                       version: Optional[int] = None) -> tuple[int, int]:
        """InitProducerId with a transactional id: ``(producer id, epoch)``, fencing any
        earlier producer of the id (and aborting its open transaction: the first call then
        raises CONCURRENT_TRANSACTIONS, a retry succeeds, as in Kafka)."""
        check_arg("transactional_id", transactional_id, "str")
        check_arg("transaction_timeout_ms", transaction_timeout_ms, "int")
        coord = self.transaction_coordinator
        with self._txn_lock:
            r = self._drive(coord.init_producer_id(transactional_id, transaction_timeout_ms, producer_id,
                                                   producer_epoch, version=version))
        if r.error is not None:
            raise r.error
        return r.producer_id, r.producer_epoch

    def add_partitions_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              partitions: Iterable, *, version: Optional[int] = None) -> None:
        """AddPartitionsToTxn: the partitions (``TopicPartition`` or ``(topic, partition)``)
        join the producer's transaction (it becomes Ongoing)."""
        tps = []
        for tp in partitions:
            tp = TopicPartition(*tp)
            self._checked_partition(tp.topic, tp.partition)
            tps.append(tp)
        coord = self.transaction_coordinator
        with self._txn_lock:
            r = self._drive(coord.add_partitions(transactional_id, producer_id, producer_epoch, tps,
                                                 version=version))
        if r.error is not None:
            raise r.error

    def add_offsets_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str, *,
                           version: Optional[int] = None, on_append: bool = False) -> None:
        """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the transaction.
        ``on_append``: a TV2 client's TxnOffsetCommit v5+ adding it itself (see
        :meth:`add_partitions_on_append`)."""
        gc = self.group_coordinator
        tp = TopicPartition(OFFSETS_TOPIC, gc._store.partition_for(group_id))
        if on_append:
            self.add_partitions_on_append(transactional_id, producer_id, producer_epoch, [tp])
            return
        coord = self.transaction_coordinator
        with self._txn_lock:
            r = self._drive(coord.add_partitions(transactional_id, producer_id, producer_epoch, [tp],
                                                 version=version))
        if r.error is not None:
            raise r.error

    def add_partitions_on_append(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                 partitions: Iterable) -> None:
        """KIP-890 TV2: a transactional Produce v12+ (or TxnOffsetCommit v5+) adds its partition
        to the producer's transaction itself, before the append — Kafka's partition leader asks
        the coordinator through ``AddPartitionsToTxnManager`` with ``addPartition``, and the
        id's transaction version becomes 2. The coordinator's answer reaches the client as the
        leader gives it: PRODUCER_FENCED (an epoch that is not the current one, e.g. the epoch
        before the last EndTxn bumped it) as INVALID_PRODUCER_EPOCH, which Produce carries."""
        tps = [TopicPartition(*tp) for tp in partitions]
        coord = self.transaction_coordinator
        with self._txn_lock:
            r = self._drive(coord.add_partitions(transactional_id, producer_id, producer_epoch, tps,
                                                 client_txn_version=_TV2))
        if isinstance(r.error, ProducerFencedError):
            raise InvalidProducerEpochError(str(r.error))
        if r.error is not None:
            raise r.error

    def txn_offset_commit(self, transactional_id: str, group_id: str, producer_id: int, producer_epoch: int,
                          offsets: dict, *, member_id: str = "", generation_id: int = -1,
                          group_instance_id: Optional[str] = None) -> None:
        """TxnOffsetCommit: ``offsets`` ({TopicPartition: OffsetAndMetadata | int}) become the
        group's committed offsets when the transaction commits, and are dropped if it aborts.
        The group's partition must be in the transaction (AddOffsetsToTxn first).

        KIP-447: ``member_id``, ``generation_id`` and ``group_instance_id`` (the consumer's
        group metadata; TxnOffsetCommit v3+) are checked against the group as Kafka's group
        coordinator does (:meth:`~kafkasim.coordinator.commits.CommitsMixin.validate_txn_offset_commit`):
        a zombie member's commit gets ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID /
        FENCED_INSTANCE_ID and nothing is staged. The defaults (no member, generation -1) are
        what clients before v3 send, and are not checked against a group's members."""
        norm = check_commit_offsets(offsets)
        check_arg("member_id", member_id, str, what="a str")
        check_arg("generation_id", generation_id, "int")
        check_arg("group_instance_id", group_instance_id, "str", none_ok=True)
        coord = self.transaction_coordinator
        with self._txn_lock:
            md = coord.metadata(transactional_id)
            tp = TopicPartition(OFFSETS_TOPIC, self.group_coordinator._store.partition_for(group_id))
            if md is None or md.producer_id != producer_id or md.producer_epoch != producer_epoch \
                    or tp not in md.topic_partitions:
                raise InvalidTxnStateError(
                    f"transactional id {transactional_id!r}: TxnOffsetCommit for group {group_id!r} before "
                    f"AddOffsetsToTxn, or from producer {producer_id} epoch {producer_epoch} that is not current")
            self.group_coordinator.validate_txn_offset_commit(group_id, member_id, generation_id, group_instance_id)
            with self.group_coordinator._lock:
                self.group_coordinator._store.store_txn_offsets(group_id, norm, self.clock.now_ms(),
                                                                producer_id, producer_epoch)
            self._txn_offsets.setdefault(transactional_id, {}).setdefault(group_id, {}).update(norm)

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool, *,
                version: Optional[int] = None, client_txn_version: int = 1) -> tuple[int, int]:
        """EndTxn: commit or abort the transaction; its markers are written before this returns.
        Returns ``(producer id, epoch)`` for the next transaction: with ``client_txn_version``
        2 (EndTxn v5, KIP-890) the epoch is one higher (a new producer id at epoch 0 once the
        epoch is exhausted), and the markers carry it; with 1 both stay."""
        coord = self.transaction_coordinator
        with self._txn_lock:
            r = self._drive(coord.end_txn(transactional_id, producer_id, producer_epoch, bool(commit),
                                          client_txn_version, version=version))
        if r.error is not None:
            raise r.error
        return r.producer_id, r.producer_epoch

    def tick_transactions(self) -> int:
        """The coordinator's periodic tasks on the broker's clock (abort transactions past their
        timeout, expire idle ids) and the retry of markers waiting for a partition's leader;
        returns how many transactional ids they changed or completed.

        A broker whose ``__transaction_state`` exists loads the coordinator here if nothing has
        yet (as Kafka loads it at startup): the transactions a crash left prepared get their
        markers, and open ones their timeout, without waiting for a transactional client."""
        if "_txn_coordinator" not in self.__dict__:
            with self._lock:
                if self._closed or TRANSACTION_STATE_TOPIC not in self._topics:
                    return 0
        coord = self.transaction_coordinator
        with self._txn_lock:
            waiting = len(self._txn_markers_pending)
            for tid, (markers, left) in sorted(self._txn_markers_pending.items()):
                self._write_markers(markers, left)        # partitions that had no leader
            completed = waiting - len(self._txn_markers_pending)
            steps = coord.tick()
            for step in steps:
                self._drive(step)
        return len(steps) + completed

    def describe_transactions(self, transactional_ids: Iterable[str]):
        return self.transaction_coordinator.describe(list(transactional_ids))

    def list_transactions(self, states_filter: Iterable[str] = (), producer_id_filter: Iterable[int] = (),
                          duration_filter_ms: int = -1):
        """ListTransactions; before any transaction (no ``__transaction_state`` yet) the answer is
        empty and the topic is not created (Kafka creates it on FindCoordinator, not here)."""
        if "_txn_coordinator" not in self.__dict__:
            if TRANSACTION_STATE_TOPIC not in self._topics:
                from kafkasim.coordinator.transactions import TransactionCoordinator
                return TransactionCoordinator(self.clock, lambda: -1).list(states_filter, producer_id_filter,
                                                                           duration_filter_ms)
        return self.transaction_coordinator.list(states_filter, producer_id_filter, duration_filter_ms)

    # -- produce-side verification ---------------------------------------------------------------
    def _verify_transactional(self, h: BatchHeader, topic: str, partition: int) -> bool:
        """True for a transactional batch whose producer id and epoch run an Ongoing transaction
        that added this partition; INVALID_TXN_STATE for any other transactional batch; False
        for a batch that is not transactional."""
        if not h.attributes & ATTR_TRANSACTIONAL:
            return False
        coord = self.transaction_coordinator
        tp = TopicPartition(topic, partition)
        with self._txn_lock:
            for tid in sorted(coord._txns):
                md = coord._txns[tid]
                if md.producer_id == h.producer_id and md.producer_epoch == h.producer_epoch \
                        and md.state.name == "ONGOING" and tp in md.topic_partitions:
                    return True
        raise InvalidTxnStateError(
            f"{topic}-{partition}: transactional batch of producer {h.producer_id} epoch {h.producer_epoch} "
            f"is not part of an ongoing transaction that added this partition")
