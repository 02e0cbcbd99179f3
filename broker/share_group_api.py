"""The broker's share group API (KIP-932): ShareGroupHeartbeat, ShareFetch, ShareAcknowledge, admin.

:class:`ShareGroupApi` is one of the parts of :class:`kafkasim.broker.broker.Broker` (and so of
``Cluster``). It owns, built on first use:

- a :class:`~kafkasim.coordinator.share_group.ShareGroupCoordinator` (membership, epochs, the
  simple assignor) on the broker's clock with the ``group.share.*`` configs
  (:mod:`kafkasim.coordinator.share_group_config`); the group itself is kept in
  ``__consumer_offsets`` as Kafka's ShareGroup* records (:mod:`kafkasim.coordinator.share_group_records`);
- one :class:`~kafkasim.coordinator.share_partition.SharePartition` per (group, topic
  partition) fetched: the delivery state, kept in ``__share_group_state`` as Kafka's
  ShareSnapshot records (:mod:`kafkasim.protocol.share_state_log`).

**Written before the answer.** Every call that changes a group or a share-partition appends
its records before it returns, and opening the broker replays both topics: after a restart no
acknowledged record is delivered again and no unacknowledged one is lost (an acquired record
comes back AVAILABLE with its delivery count; locks do not survive).

**ShareFetch** (:meth:`ShareGroupApi.share_fetch`) applies the acknowledgements first, then, per
partition, reads the stored batches from the share-partition start offset (the same read path
as Fetch, :meth:`~kafkasim.broker.data.DataPlane.fetch_batches`) and acquires AVAILABLE records
for the member, at most ``max_records`` over the request (a batch never delivered is taken
whole, as Kafka does). The answer holds the whole stored batches that contain acquired offsets,
as stored, within ``max_bytes`` (at least one batch). A share-partition fetched for the first
time starts at ``share.auto.offset.reset`` (latest, earliest, by_duration:<ISO-8601>).

**A group id is one type**: a share group id is refused by the consumer and classic group
calls and the reverse (GROUP_ID_NOT_FOUND "Group <id> is not a share group.").

Timers (member sessions, record locks) run from :meth:`ShareGroupApi.tick_share_groups`, which
``Broker.tick()`` calls and ``kafkasim serve`` runs on real time.

Thread-safety: one lock (``_share_lock``) serialises every call into the coordinator and the
share-partitions, neither of which is thread-safe itself.

This module is over 500 lines because it is one job, the share groups' side of ``Broker``:
eleven calls of the contract that share one lock, one lazily built state and one write-before-
answer path (the state machine, the membership, the record codecs and the configs are their
own modules under ``coordinator/`` and ``kafkasim/protocol/``).
"""

from __future__ import annotations

import threading
import uuid
import warnings
from typing import Any, Iterable, Mapping, Optional, Sequence

from kafkasim.arguments import bad_arg, check_topic_partition
from kafkasim.coordinator.consumer_group_records import changes
from kafkasim.coordinator.offsets_store import OffsetsStore
from kafkasim.coordinator.share_group import ShareGroup, ShareGroupCoordinator
from kafkasim.coordinator.share_group_config import SHARE_GROUP_CONFIGS, ShareGroupConfig, parse_offset_reset
from kafkasim.coordinator.share_group_records import (
    SHARE_GROUP_KINDS, share_group_records, share_groups_from_records,
)
from kafkasim.coordinator.share_partition import SharePartition, StoredBatch
from kafkasim.errors import (
    BrokerResponseError, CoordinatorNotAvailableError, CorruptRecordError, GroupIdNotFoundError, InvalidRecordStateError,
    InvalidRequestError, KafkaSimError, NonEmptyGroupError, UnknownMemberIdError, UnknownTopicOrPartitionError,
)
from kafkasim.protocol import share_state_log as ssl
from kafkasim.protocol.offsets import OFFSETS_TOPIC
from kafkasim.protocol.share_group import (
    SHARE, AcknowledgementBatch, ShareFetchPartition, ShareHeartbeatResult,
)
from kafkasim.records.framing import ATTR_CONTROL, ATTR_TRANSACTIONAL
from kafkasim.types import TopicPartition

from kafkasim.broker.core import BrokerCore

__all__ = ["ShareGroupApi", "ShareTick"]

_READ_BYTES = 4 * 1024 * 1024
_EARLIEST, _LATEST = -2, -1


class ShareTick(dict):
    """What :meth:`ShareGroupApi.tick_share_groups` did: ``{"fenced": [(group, member)],
    "released": n}``; true when it fenced or released anything (a waiting ShareFetch may go on)."""

    def __bool__(self) -> bool:
        return bool(self["fenced"] or self["released"])


class ShareGroupApi(BrokerCore):
    """Share groups (see the module docstring)."""

    # -- state, built on first use ----------------------------------------------------------

    @property
    def share_group_coordinator(self) -> ShareGroupCoordinator:
        """The share group coordinator, created on first use (replays both internal topics)."""
        coord = self.__dict__.get("_share_coordinator")
        if coord is not None:
            return coord
        with self._lock:
            if self._closed:
                raise CoordinatorNotAvailableError(f"broker over {self.data_dir} is closed")
            coord = self.__dict__.get("_share_coordinator")
            if coord is None:
                config = ShareGroupConfig.from_configs({n: self.broker_config[n] for n in SHARE_GROUP_CONFIGS})
                coord = ShareGroupCoordinator(self.clock, config, self._share_topics_image())
                self._share_lock = threading.RLock()
                self._share_partitions: dict[tuple[str, TopicPartition], SharePartition] = {}
                self._share_snapshot_epochs: dict[tuple[str, TopicPartition], int] = {}
                names = {tid: name for name, (tid, _) in coord.topics.items()}
                for group in share_groups_from_records(self._replayed_share_group_records(), names).values():
                    coord.load_group(group)
                self._load_share_state(coord, names)
                self._share_topics_seen = self._share_topics_key()
                self._share_coordinator = coord
        return coord

    def _check_share_group_configs(self) -> None:
        """The share configs' cross-checks (InvalidConfigurationError, as Kafka fails at start)."""
        ShareGroupConfig.from_configs({n: self.broker_config[n] for n in SHARE_GROUP_CONFIGS})

    def _share_topics_key(self) -> tuple:
        with self._lock:
            return tuple(sorted((m.name, m.topic_id, m.partitions) for m in self._topics.values()))

    def _share_topics_image(self) -> dict[str, tuple[uuid.UUID, int]]:
        with self._lock:
            return {m.name: (uuid.UUID(hex=m.topic_id), m.partitions) for m in self._topics.values()}

    def _refresh_share_topics(self, coord: ShareGroupCoordinator) -> None:
        """Give the coordinator the broker's topics when they changed (caller holds the lock);
        groups whose subscribed metadata changed get a new target, persisted."""
        key = self._share_topics_key()
        if key == self._share_topics_seen:
            return
        old = dict(coord.topics)
        before = {gid: self._share_records(coord, gid) for gid in coord.groups()}
        changed = set(coord.refresh_topics(self._share_topics_image()))
        gone = {name for name, (tid, _) in old.items() if coord.topics.get(name, (None,))[0] != tid}
        for gid, tp in [k for k in self._share_partitions if k[1].topic in gone]:
            # a deleted (or deleted and re-created) topic: its share-partitions go with it, as
            # Kafka deletes their state; the old topic id's records no longer replay
            del self._share_partitions[(gid, tp)]
            self._share_snapshot_epochs.pop((gid, tp), None)
            group = coord.find_group(gid)
            if group is not None and group.initialized.pop(tp.topic, None) is not None:
                changed.add(gid)
        for gid in sorted(changed):
            self._persist_share_group(coord, gid, before[gid])
        self._share_topics_seen = key

    def _replayed_share_group_records(self) -> dict:
        classic = self.__dict__.get("_group_coordinator")
        if classic is not None:
            return classic.share_group_records
        with self._lock:
            if OFFSETS_TOPIC not in self._topics:
                return {}
            n = self._topics[OFFSETS_TOPIC].partitions
        return OffsetsStore([self.log(OFFSETS_TOPIC, p) for p in range(n)]).load().share_group_records

    def _load_share_state(self, coord: ShareGroupCoordinator, names: Mapping[uuid.UUID, str]) -> None:
        """Replay ``__share_group_state``: the latest snapshot per share-partition, then the
        updates after it; tombstones delete."""
        with self._lock:
            if ssl.SHARE_GROUP_STATE_TOPIC not in self._topics:
                return
            n = self._topics[ssl.SHARE_GROUP_STATE_TOPIC].partitions
        latest: dict[tuple, Any] = {}
        for p in range(n):
            log = self.log(ssl.SHARE_GROUP_STATE_TOPIC, p)
            offset, end = log.log_start_offset, log.log_end_offset
            while offset < end:
                records, next_offset = log.fetch(offset, _READ_BYTES)
                if next_offset <= offset:
                    break
                offset = next_offset
                for rec in records:
                    try:
                        key = ssl.decode_key(rec.key)
                        value = ssl.decode_value(key.type, rec.value)
                    except CorruptRecordError as exc:
                        warnings.warn(f"{ssl.SHARE_GROUP_STATE_TOPIC} offset {rec.offset}: skipped: {exc}",
                                      RuntimeWarning, stacklevel=2)
                        continue
                    ident = (key.group_id, key.topic_id, key.partition)
                    if value is None:
                        latest.pop(ident, None)
                    elif key.type == ssl.SHARE_SNAPSHOT:
                        latest[ident] = [value.snapshot_epoch, value.start_offset, dict(
                            (b[0], b) for b in value.state_batches)]
                    elif ident in latest:
                        entry = latest[ident]
                        if value.start_offset >= 0:
                            entry[1] = value.start_offset
                        for b in value.state_batches:
                            entry[2][b[0]] = b
        cfg = coord.config
        for (gid, tid, p), (epoch, start, batches) in latest.items():
            if tid not in names:
                continue
            tp = TopicPartition(names[tid], p)
            self._share_partitions[(gid, tp)] = SharePartition.from_state(
                start, batches.values(), delivery_count_limit=cfg.delivery_count_limit,
                max_record_locks=cfg.partition_max_record_locks)
            self._share_snapshot_epochs[(gid, tp)] = epoch

    # -- persistence ------------------------------------------------------------------------

    def _share_records(self, coord: ShareGroupCoordinator, group_id: str) -> dict:
        ids = {name: tid for name, (tid, _) in coord.topics.items()}
        return share_group_records(coord.find_group(group_id), ids)

    def _persist_share_group(self, coord: ShareGroupCoordinator, group_id: str, before: dict) -> None:
        """Append what changed in ``group_id`` since ``before`` to ``__consumer_offsets``."""
        records = changes(before, self._share_records(coord, group_id), SHARE_GROUP_KINDS)
        if records:
            self.group_coordinator.store_consumer_group_records(group_id, records)

    def _share_state_log(self, group_id: str, topic_id: uuid.UUID, partition: int):
        with self._lock:
            if ssl.SHARE_GROUP_STATE_TOPIC not in self._topics:
                self.create_topic(ssl.SHARE_GROUP_STATE_TOPIC,
                                  self.broker_config["share.coordinator.state.topic.num.partitions"], 1,
                                  ssl.SHARE_GROUP_STATE_TOPIC_CONFIGS)
            n = self._topics[ssl.SHARE_GROUP_STATE_TOPIC].partitions
        return self.log(ssl.SHARE_GROUP_STATE_TOPIC, ssl.partition_for(group_id, topic_id, partition, n))

    def _persist_share_partition(self, coord: ShareGroupCoordinator, group_id: str, tp: TopicPartition) -> None:
        """Append the share-partition's ShareSnapshot (a tombstone when it was dropped)."""
        topic = coord.topics.get(tp.topic)
        if topic is None:
            return
        tid = topic[0]
        sp = self._share_partitions.get((group_id, tp))
        key = ssl.encode_key(ssl.ShareKey(ssl.SHARE_SNAPSHOT, group_id, tid, tp.partition))
        if sp is None:
            value = None
        else:
            epoch = (self._share_snapshot_epochs.get((group_id, tp), -1) + 1) & 0xFFFF
            self._share_snapshot_epochs[(group_id, tp)] = epoch
            start, batches = sp.persisted_state()     # records settled since the last write, with their state
            value = ssl.encode_value(ssl.ShareSnapshot(epoch, 0, 0, start, tuple(batches)))
        self._share_state_log(group_id, tid, tp.partition).append([(self.clock.now_ms(), key, value, ())])

    # -- checks -----------------------------------------------------------------------------

    def _share_group_id(self, group_id: Any) -> str:
        if not isinstance(group_id, str) or not group_id:
            raise InvalidRequestError(f"GroupId can't be empty (got {group_id!r:.80}).")
        return group_id

    def _refuse_other_types(self, group_id: str) -> None:
        """A consumer or classic group by this id: GROUP_ID_NOT_FOUND, as Kafka."""
        if self.is_consumer_group(group_id) or self._classic_group_exists(group_id):
            raise GroupIdNotFoundError(f"Group {group_id} is not a share group.")

    def _classic_group_exists(self, group_id: str) -> bool:
        classic = self.__dict__.get("_group_coordinator")
        if classic is None:
            return False
        return any(g["group_id"] == group_id for g in classic.list_groups())

    def _share_group_ids(self) -> frozenset[str]:
        coord = self._share_coordinator_if_any()
        if coord is None:
            return frozenset()
        with self._share_lock:
            return frozenset(coord.groups())

    def _share_coordinator_if_any(self) -> Optional[ShareGroupCoordinator]:
        coord = self.__dict__.get("_share_coordinator")
        if coord is None and not self._closed:
            with self._lock:
                restarted = OFFSETS_TOPIC in self._topics or ssl.SHARE_GROUP_STATE_TOPIC in self._topics
            if restarted:
                coord = self.share_group_coordinator       # replays what a restart left
        return coord

    def is_share_group(self, group_id: str) -> bool:
        """Whether ``group_id`` names a share group on this broker."""
        return group_id in self._share_group_ids()

    # -- ShareGroupHeartbeat ----------------------------------------------------------------

    def share_group_heartbeat(self, group_id: str, member_id: str, member_epoch: int, *,
                              subscribed_topic_names: Optional[Sequence[str]] = None,
                              rack_id: Optional[str] = None, client_id: str = "",
                              client_host: str = "") -> ShareHeartbeatResult:
        """One ShareGroupHeartbeat (:meth:`ShareGroupCoordinator.heartbeat`); a member that
        leaves (epoch -1) releases every record it holds."""
        self._share_group_id(group_id)
        coord = self.share_group_coordinator
        if coord.find_group(group_id) is None:
            self._refuse_other_types(group_id)
        with self._share_lock:
            self._refresh_share_topics(coord)
            before = self._share_records(coord, group_id)
            result = coord.heartbeat(group_id, member_id, member_epoch, subscribed_topic_names=subscribed_topic_names,
                                     rack_id=rack_id, client_id=client_id, client_host=client_host)
            if member_epoch == -1:
                self._release_member(coord, group_id, member_id)
            self._persist_share_group(coord, group_id, before)
            return result

    def _release_member(self, coord: ShareGroupCoordinator, group_id: str, member_id: str) -> None:
        for (gid, tp), sp in sorted(self._share_partitions.items()):
            if gid == group_id and sp.release_member(member_id):
                self._persist_share_partition(coord, gid, tp)

    # -- ShareFetch / ShareAcknowledge -------------------------------------------------------

    def _member_group(self, coord: ShareGroupCoordinator, group_id: str, member_id: str) -> ShareGroup:
        group = coord.find_group(self._share_group_id(group_id))
        if group is None or member_id not in group.members:
            raise UnknownMemberIdError(f"Member {member_id} is not a member of share group {group_id}.")
        return group

    def share_fetch(self, group_id: str, member_id: str, partitions: Iterable[TopicPartition], *,
                    max_records: int = 500, max_bytes: int = 52_428_800, batch_size: int = 500,
                    acknowledgements: Optional[Mapping[TopicPartition, Sequence[AcknowledgementBatch]]] = None
                    ) -> dict[TopicPartition, ShareFetchPartition]:
        """ShareFetch for ``member_id`` of share group ``group_id`` (see the module docstring).
        ``acknowledgements`` are applied first; a partition in them but not in ``partitions``
        is only acknowledged. Raises UNKNOWN_MEMBER_ID for a member not in the group."""
        if isinstance(partitions, (str, bytes)) or not isinstance(partitions, Iterable):
            raise bad_arg("partitions", partitions, "an iterable of TopicPartition")
        wanted = list(dict.fromkeys(check_topic_partition(tp) for tp in partitions))
        for name, value in (("max_records", max_records), ("max_bytes", max_bytes), ("batch_size", batch_size)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise bad_arg(name, value, "a positive int")
        coord = self.share_group_coordinator
        with self._share_lock:
            self._refresh_share_topics(coord)
            group = self._member_group(coord, group_id, member_id)
            out: dict[TopicPartition, ShareFetchPartition] = {}
            if acknowledgements:
                for tp, err in self._acknowledge(coord, group_id, member_id, acknowledgements).items():
                    out[tp] = ShareFetchPartition(acknowledge_error=err)
            budget, room = max_records, max_bytes
            for tp in wanted:
                part = out.setdefault(tp, ShareFetchPartition())
                if budget <= 0 or room <= 0:
                    continue                    # the answer is full
                try:
                    got = self._acquire(coord, group, member_id, tp, budget, room)
                except BrokerResponseError as exc:      # NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION...
                    part.error = exc
                    continue
                part.records, part.acquired, part.high_watermark, part.log_start_offset = got
                budget -= sum(a.last_offset - a.first_offset + 1 for a in part.acquired)
                room -= len(part.records)
            return out

    def _share_partition(self, coord: ShareGroupCoordinator, group: ShareGroup, tp: TopicPartition) -> SharePartition:
        """The share-partition of ``group`` over ``tp``, initialised on first use at
        ``share.auto.offset.reset`` and recorded in the group's initialised partitions."""
        sp = self._share_partitions.get((group.group_id, tp))
        if sp is not None:
            return sp
        strategy, duration = parse_offset_reset(coord.config.auto_offset_reset)
        if strategy == "earliest":
            start = self.list_offsets(tp.topic, tp.partition, _EARLIEST)[0]
        elif strategy == "latest":
            start = self.list_offsets(tp.topic, tp.partition, _LATEST)[0]
        else:
            start = self.list_offsets(tp.topic, tp.partition, self.clock.now_ms() - duration)[0]
            if start < 0:
                start = self.list_offsets(tp.topic, tp.partition, _LATEST)[0]
        cfg = coord.config
        sp = SharePartition(start, delivery_count_limit=cfg.delivery_count_limit,
                            max_record_locks=cfg.partition_max_record_locks)
        self._share_partitions[(group.group_id, tp)] = sp
        before = self._share_records(coord, group.group_id)
        group.initialized[tp.topic] = group.initialized.get(tp.topic, frozenset()) | {tp.partition}
        self._persist_share_group(coord, group.group_id, before)
        self._persist_share_partition(coord, group.group_id, tp)
        return sp

    def _acquire(self, coord: ShareGroupCoordinator, group: ShareGroup, member_id: str, tp: TopicPartition,
                 budget: int, room: int) -> tuple[bytes, list, int, int]:
        """Acquire records of ``tp`` for the member: (records bytes, acquired ranges, high
        watermark, log start offset). Persists the share-partition when anything changed."""
        self._checked_partition(tp.topic, tp.partition)
        sp = self._share_partition(coord, group, tp)
        isolation = 1 if coord.config.isolation_level == "read_committed" else 0
        log_start = self.list_offsets(tp.topic, tp.partition, _EARLIEST)[0]
        moved = log_start > sp.start_offset
        sp.move_start(log_start)
        chunks: list[bytes] = []
        acquired: list = []
        hw, lso = -1, -1
        at = sp.start_offset
        lock_ms = coord.config.record_lock_duration_ms
        full = False
        while budget > 0 and not full:
            read = self.fetch_batches(tp.topic, tp.partition, at, max(1, min(room, _READ_BYTES)),
                                      isolation_level=isolation)
            hw, log_start, lso = read.high_watermark, read.log_start_offset, read.last_stable_offset
            bound = lso if isolation == 1 else hw
            if not read.batches:
                break
            aborted = read.aborted_transactions or ()
            for h, raw in read.batches:
                if budget <= 0 or (chunks and len(raw) > room):
                    full = True                 # the answer is full: this batch is not acquired
                    break
                data = not h.attributes & ATTR_CONTROL and not (h.attributes & ATTR_TRANSACTIONAL and any(
                    a.producer_id == h.producer_id and a.first_offset <= h.base_offset <= a.last_offset
                    for a in aborted))
                got = sp.acquire(member_id, [StoredBatch(h.base_offset, h.last_offset, data)], bound,
                                 max_records=budget, lock_duration_ms=lock_ms, now_ms=self.clock.now_ms())
                if got:
                    acquired.extend(got)
                    budget -= sum(a.last_offset - a.first_offset + 1 for a in got)
                    chunks.append(raw)
                    room -= len(raw)
                if sp.in_flight() >= sp.max_record_locks and h.next_offset >= sp.next_offset:
                    full = True                 # no new batch may start: the in-flight limit
                    break
            at = read.batches[-1][0].next_offset
            if at >= bound:
                break
        if acquired or moved:
            self._persist_share_partition(coord, group.group_id, tp)
        if hw < 0:
            hw = self.list_offsets(tp.topic, tp.partition, _LATEST)[0]
        return b"".join(chunks), acquired, hw, log_start

    def _acknowledge(self, coord: ShareGroupCoordinator, group_id: str, member_id: str,
                     acknowledgements: Mapping[TopicPartition, Sequence[AcknowledgementBatch]]
                     ) -> dict[TopicPartition, Optional[KafkaSimError]]:
        if not isinstance(acknowledgements, Mapping):
            raise bad_arg("acknowledgements", acknowledgements, "a mapping of TopicPartition to AcknowledgementBatch lists")
        out: dict[TopicPartition, Optional[KafkaSimError]] = {}
        for tp, batches in acknowledgements.items():
            tp = check_topic_partition(tp)
            if isinstance(batches, AcknowledgementBatch) or not all(
                    isinstance(b, AcknowledgementBatch) for b in batches):
                raise bad_arg(f"acknowledgements[{tp.topic}-{tp.partition}]", batches,
                              "a sequence of AcknowledgementBatch")
            try:
                self._checked_partition(tp.topic, tp.partition)
                sp = self._share_partitions.get((group_id, tp))
                if sp is None:
                    raise InvalidRecordStateError(
                        f"share group {group_id} has no records in flight on {tp.topic}-{tp.partition}")
                sp.acknowledge(member_id, list(batches))
            except (UnknownTopicOrPartitionError, InvalidRecordStateError, InvalidRequestError) as exc:
                out[tp] = exc
                continue
            out[tp] = None
            self._persist_share_partition(coord, group_id, tp)
        return out

    def share_acknowledge(self, group_id: str, member_id: str,
                          acknowledgements: Mapping[TopicPartition, Sequence[AcknowledgementBatch]]
                          ) -> dict[TopicPartition, Optional[KafkaSimError]]:
        """ShareAcknowledge: per partition None (applied) or its error (INVALID_RECORD_STATE:
        a record not acquired by the member; nothing of that partition changed)."""
        coord = self.share_group_coordinator
        with self._share_lock:
            self._member_group(coord, group_id, member_id)
            return self._acknowledge(coord, group_id, member_id, acknowledgements)

    def share_session_close(self, group_id: str, member_id: str) -> None:
        """The member's share session closed: every record it holds is released."""
        coord = self.share_group_coordinator
        with self._share_lock:
            self._release_member(coord, self._share_group_id(group_id), member_id)

    # -- timers -------------------------------------------------------------------------------

    def tick_share_groups(self) -> ShareTick:
        """Fence the share group members whose session ran out and release the record locks
        that expired, by the broker's clock: ``{"fenced": [(group, member)], "released": n}``,
        false when nothing happened."""
        coord = self._share_coordinator_if_any()
        if coord is None or self._closed:
            return ShareTick(fenced=[], released=0)
        with self._share_lock:
            self._refresh_share_topics(coord)
            now = self.clock.now_ms()
            fenced: list = []
            due = coord.next_deadline_ms()
            if due is not None and due <= now:
                before = {gid: self._share_records(coord, gid) for gid in coord.groups()}
                fenced = coord.tick()
                for gid, mid in fenced:
                    self._release_member(coord, gid, mid)
                for gid in sorted({g for g, _ in fenced}):
                    self._persist_share_group(coord, gid, before[gid])
            released = 0
            for (gid, tp), sp in sorted(self._share_partitions.items()):
                deadline = sp.next_deadline_ms()
                if deadline is not None and deadline <= now:
                    n = sp.expire(now)
                    if n:
                        released += n
                        self._persist_share_partition(coord, gid, tp)
            return ShareTick(fenced=fenced, released=released)

    # -- describe, list, delete, offsets -----------------------------------------------------

    def share_group_describe(self, group_ids: Iterable[str]) -> list[dict]:
        """ShareGroupDescribe: per id its description, or ``{"group_id", "error":
        GroupIdNotFoundError}``. Each member's ``assignment`` is ``[(topic id, name, [partitions])]``."""
        if isinstance(group_ids, (str, bytes)) or not isinstance(group_ids, Iterable):
            raise bad_arg("group_ids", group_ids, "an iterable of group ids")
        coord = self.share_group_coordinator
        out = []
        with self._share_lock:
            self._refresh_share_topics(coord)
            for gid in group_ids:
                group = coord.find_group(gid)
                if group is None:
                    msg = (f"Group {gid} is not a share group." if isinstance(gid, str) and (
                        self.is_consumer_group(gid) or self._classic_group_exists(gid)) else f"Group {gid} not found.")
                    out.append({"group_id": gid, "error": GroupIdNotFoundError(msg)})
                    continue
                out.append({
                    "group_id": gid, "error": None, "group_state": group.state, "state": group.state,
                    "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
                    "assignor_name": coord.assignor.name,
                    "members": [{
                        "member_id": m.member_id, "rack_id": m.rack_id, "member_epoch": m.member_epoch,
                        "client_id": m.client_id, "client_host": m.client_host,
                        "subscribed_topic_names": list(m.subscribed_topic_names),
                        "assignment": [(coord.topics[t][0], t, sorted(ps)) for t, ps in sorted(m.assignment.items())
                                       if t in coord.topics]}
                        for _, m in sorted(group.members.items())]})
        return out

    def list_share_groups(self) -> list[dict]:
        """The share groups: ``{"group_id", "group_state", "state", "protocol_type": "share",
        "type": "share"}``, sorted by id."""
        coord = self._share_coordinator_if_any()
        if coord is None:
            return []
        with self._share_lock:
            return [{"group_id": gid, "group_state": coord.find_group(gid).state,
                     "state": coord.find_group(gid).state, "protocol_type": SHARE, "type": SHARE}
                    for gid in coord.groups()]

    def _describe_share_group_as_classic(self, group_id: str) -> dict:
        """A share group in the shape of ``Broker.describe_group`` (``type`` "share")."""
        desc = self.share_group_describe([group_id])[0]
        if desc["error"] is not None:
            raise desc["error"]
        return {"group_id": group_id, "type": SHARE, "state": desc["group_state"], "protocol_type": SHARE,
                "protocol": desc["assignor_name"], "generation": desc["group_epoch"], "leader": None,
                "group_epoch": desc["group_epoch"], "assignment_epoch": desc["assignment_epoch"],
                "members": [{"member_id": m["member_id"], "group_instance_id": None, "client_id": m["client_id"],
                             "client_host": m["client_host"], "member_epoch": m["member_epoch"],
                             "member_type": SHARE,
                             "assignment": [TopicPartition(name, p) for _, name, ps in m["assignment"] for p in ps],
                             "assignment_bytes": None, "metadata": None}
                            for m in desc["members"]],
                "offsets": {}}

    def delete_share_group(self, group_id: str) -> None:
        """DeleteGroups for a share group: NON_EMPTY_GROUP while it has members,
        GROUP_ID_NOT_FOUND when there is none; its share-partition state is deleted too."""
        coord = self.share_group_coordinator
        with self._share_lock:
            _empty_group(coord, group_id)
            for gid, tp in sorted(k for k in self._share_partitions if k[0] == group_id):
                del self._share_partitions[(gid, tp)]
                self._persist_share_partition(coord, gid, tp)
            before = self._share_records(coord, group_id)
            coord.delete_group(group_id)
            self._persist_share_group(coord, group_id, before)

    def describe_share_group_offsets(self, group_id: str, partitions: Optional[Iterable[TopicPartition]] = None
                                     ) -> dict[TopicPartition, dict]:
        """DescribeShareGroupOffsets: per partition ``{"start_offset", "leader_epoch", "lag"}``
        (start offset -1 when the share-partition is not initialised; lag: records after the
        start offset not yet delivered for good, below the high watermark)."""
        coord = self.share_group_coordinator
        with self._share_lock:
            group = coord.find_group(group_id)
            if group is None:
                raise GroupIdNotFoundError(f"Group {group_id} not found.")
            if partitions is None:
                wanted = sorted(tp for gid, tp in self._share_partitions if gid == group_id)
            else:
                if isinstance(partitions, (str, bytes)) or not isinstance(partitions, Iterable):
                    raise bad_arg("partitions", partitions, "an iterable of TopicPartition")
                wanted = [check_topic_partition(tp) for tp in partitions]
            out = {}
            for tp in wanted:
                sp = self._share_partitions.get((group_id, tp))
                if sp is None:
                    out[tp] = {"start_offset": -1, "leader_epoch": -1, "lag": -1}
                    continue
                try:
                    hw = self.list_offsets(tp.topic, tp.partition, _LATEST)[0]
                except UnknownTopicOrPartitionError:
                    hw = sp.start_offset
                done = sp.done_in_flight()
                out[tp] = {"start_offset": sp.start_offset, "leader_epoch": 0,
                           "lag": max(0, hw - sp.start_offset - done)}
            return out

    def alter_share_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]
                                  ) -> dict[TopicPartition, Optional[KafkaSimError]]:
        """AlterShareGroupOffsets: reset each share-partition's start offset (its in-flight state
        is dropped). Only for an empty group (NON_EMPTY_GROUP otherwise); a share group is
        created when there is none by that id."""
        if not isinstance(offsets, Mapping):
            raise bad_arg("offsets", offsets, "a mapping of TopicPartition to offset")
        self._share_group_id(group_id)
        coord = self.share_group_coordinator
        if coord.find_group(group_id) is None:
            self._refuse_other_types(group_id)
        with self._share_lock:
            group = coord.find_group(group_id)
            if group is not None:
                _check_empty(group_id, group)
            before = self._share_records(coord, group_id)
            if group is None:
                group = coord.create_group(group_id)
            out: dict[TopicPartition, Optional[KafkaSimError]] = {}
            cfg = coord.config
            for tp, offset in offsets.items():
                tp = check_topic_partition(tp)
                if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
                    out[tp] = InvalidRequestError(f"offset {offset!r} of {tp.topic}-{tp.partition} is not >= 0")
                    continue
                try:
                    self._checked_partition(tp.topic, tp.partition)
                except UnknownTopicOrPartitionError as exc:
                    out[tp] = exc
                    continue
                self._share_partitions[(group_id, tp)] = SharePartition(
                    offset, delivery_count_limit=cfg.delivery_count_limit,
                    max_record_locks=cfg.partition_max_record_locks)
                group.initialized[tp.topic] = group.initialized.get(tp.topic, frozenset()) | {tp.partition}
                self._persist_share_partition(coord, group_id, tp)
                out[tp] = None
            self._persist_share_group(coord, group_id, before)
            return out

    def delete_share_group_offsets(self, group_id: str, topics: Iterable[str]) -> dict[str, Optional[KafkaSimError]]:
        """DeleteShareGroupOffsets: drop the share-partition state of ``topics`` (NON_EMPTY_GROUP
        while the group has members; UNKNOWN_TOPIC_OR_PARTITION per unknown topic)."""
        if isinstance(topics, (str, bytes)) or not isinstance(topics, Iterable):
            raise bad_arg("topics", topics, "an iterable of topic names")
        coord = self.share_group_coordinator
        with self._share_lock:
            group = _empty_group(coord, group_id)
            before = self._share_records(coord, group_id)
            out: dict[str, Optional[KafkaSimError]] = {}
            for topic in topics:
                if topic not in coord.topics:
                    out[topic] = UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
                    continue
                for gid, tp in sorted(k for k in self._share_partitions if k[0] == group_id and k[1].topic == topic):
                    del self._share_partitions[(gid, tp)]
                    self._persist_share_partition(coord, gid, tp)
                group.initialized.pop(topic, None)
                out[topic] = None
            self._persist_share_group(coord, group_id, before)
            return out

    # -- what the property tests and the view read ------------------------------------------

    def share_partition_state(self, group_id: str, tp: TopicPartition) -> Optional[SharePartition]:
        """The live share-partition of ``group_id`` over ``tp`` (None when not initialised);
        read it under no lock only in single-threaded code (tests, labs)."""
        self.share_group_coordinator
        return self._share_partitions.get((group_id, tp))


def _check_empty(group_id: str, group: ShareGroup) -> None:
    if group.members:
        raise NonEmptyGroupError(f"The group {group_id} is not empty: it has {len(group.members)} members.")


def _empty_group(coord: ShareGroupCoordinator, group_id: str) -> ShareGroup:
    """The share group ``group_id``, which must exist (GROUP_ID_NOT_FOUND) and have no members
    (NON_EMPTY_GROUP): what deleting a group or its offsets requires, as Kafka's coordinator."""
    group = coord.find_group(group_id)
    if group is None:
        raise GroupIdNotFoundError(f"Group {group_id} not found.")
    _check_empty(group_id, group)
    return group
