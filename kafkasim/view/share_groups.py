"""Share groups (KIP-932) as the data dir records them: members, assignments, in-flight records.

Two sources, both folded in offset order by :class:`ShareGroupsModel` (fed by
:class:`kafkasim.view.snapshot.DataDirWatcher`):

1. **The group** (:meth:`ShareGroupsModel.apply_group_record`): Kafka's share group records in
   ``__consumer_offsets`` (types 10..15, :mod:`kafkasim.protocol.share_group_log`), which the
   group coordinator appends before it answers a heartbeat that changed the group: its epoch
   (11), its target assignment epoch (12), per member its metadata (10: client id, host, rack,
   subscription), its target (13) and its current assignment (14: member epoch, partitions), and
   the share-partitions whose state was initialized (15, with the topics' names). The latest
   record per key wins, a tombstone deletes the key, as a restarted coordinator reloads them.
   A share group exists while its epoch record does; it is Empty without members, else Stable
   (Kafka's ``ShareGroupState``). One partition may be assigned to several members: each member
   fetches from every partition it is assigned.
2. **Each share-partition's delivery state** (:meth:`ShareGroupsModel.apply_state_record`): the
   share coordinator's ``__share_group_state`` (:mod:`kafkasim.protocol.share_state_log`): a
   ShareSnapshot is the whole state (the share-partition start offset, SPSO, and state batches
   ``(first, last, delivery state, delivery count)``), a ShareUpdate a delta over it (its start
   offset, unless -1, moves the SPSO and forgets the offsets below; its batches replace those
   offsets' states), as Kafka's share coordinator merges them. Kafka's ``SharePartition``
   writes the records it just settled (ACKNOWLEDGED, ARCHIVED) with the start offset from before
   them and persists the SPSO move with its next write; the view moves the SPSO over the settled
   prefix at once, as a reload does (Kafka's ``maybeUpdateCachedStateAndOffsets``), and a
   settled record written again below it is not counted twice.

What a share-partition shows (:meth:`_PartitionState.to_json`):

- ``start_offset`` (SPSO), ``end_offset`` (SPEO: the last offset the state holds; None when it
  holds none) and ``in_flight``: the offsets from the SPSO to the SPEO, each counted by its
  persisted state: ``available`` (delivery count 0: never delivered), ``delivered`` (AVAILABLE
  with a delivery count: handed to a member and not settled yet: acquired now, or released for
  redelivery; Kafka persists no ACQUIRED state and no lock, so the state topic cannot tell which),
  ``acknowledged`` and ``archived``;
- ``redelivered``: in-flight records with a delivery count of 2 or more;
- ``redeliveries``: every delivery after a record's first one the state records show (a count
  rising from 1 to 3 is two), counted over the whole topic as the view reads it from its start,
  so it does not drop when the SPSO moves past the records (kafkasim keeps the topic whole:
  ``retention.ms`` -1; Kafka prunes it below the oldest snapshot it needs, and a view of that
  counts what is left); ``archived_total`` and ``archived_at_limit``
  (records that turned ARCHIVED, and of those the ones whose delivery count had reached the
  delivery limit: released once too often, never accepted), counted the same way;
- ``max_delivery_count``: the highest delivery count in flight.

The delivery limit is the broker's ``group.share.delivery.count.limit``, which the data dir does
not record: the view uses Kafka's default (:data:`DELIVERY_COUNT_LIMIT`).

Invariants: every number is counted from the records read; a record that does not decode is
counted in ``skipped`` and otherwise ignored (as the coordinators' replay does); at most
:data:`MAX_TRACKED` offsets per share-partition are tracked (a batch wider than that is a
problem, not a loop of a billion steps).

Thread-safety: not thread-safe; one owner feeds and reads it.
"""

from __future__ import annotations

import uuid
from collections import deque
from typing import Any, Callable, Mapping, Optional

from kafkasim.config import BROKER_CONFIGS
from kafkasim.errors import CorruptRecordError
from kafkasim.protocol import share_group_log as sgl
from kafkasim.protocol import share_state_log as ssl
from kafkasim.protocol.consumer_group_log import kafka_uuid
from kafkasim.protocol.share_group import ACKNOWLEDGED, ARCHIVED, AVAILABLE, SHARE
from kafkasim.view.groups import member_label

__all__ = ["ShareGroupsModel", "DELIVERY_COUNT_LIMIT", "MAX_TRACKED"]

DELIVERY_COUNT_LIMIT = int(BROKER_CONFIGS["group.share.delivery.count.limit"].default)
"""Kafka's default ``group.share.delivery.count.limit``: deliveries before a released record is archived."""
ASSIGNOR = str(BROKER_CONFIGS["group.share.assignors"].default).split(",")[0].strip()
"""The share assignor (Kafka's ``group.share.assignors``: ``simple``)."""
MAX_TRACKED = 1_000_000
"""Offsets tracked per share-partition at most (Kafka keeps ``group.share.partition.max.record.locks`` in flight)."""
EMPTY, STABLE = "Empty", "Stable"


class _PartitionState:
    """One share-partition's persisted delivery state and what the view counted of its history."""

    __slots__ = ("start_offset", "offsets", "max_seen", "redeliveries", "archived_total", "archived_at_limit",
                 "state_epoch", "leader_epoch", "updated")

    def __init__(self) -> None:
        self.start_offset = 0
        self.offsets: dict[int, tuple[int, int]] = {}     # offset -> (delivery state, delivery count)
        self.max_seen: dict[int, int] = {}                # offset -> highest delivery count seen
        self.redeliveries = self.archived_total = self.archived_at_limit = 0
        self.state_epoch = self.leader_epoch = 0
        self.updated: Optional[int] = None

    def apply(self, value: Any, timestamp: int, limit: int) -> Optional[str]:
        """A ShareSnapshot or ShareUpdate value; returns a problem, or None. Offsets below the
        SPSO the view had already moved to are settled records written again (Kafka writes
        them with the start offset from before they settled): not counted twice."""
        known = self.start_offset if self.updated is not None else -1
        if isinstance(value, ssl.ShareSnapshot):
            old = self.offsets
            self.offsets = {}
            self.start_offset = value.start_offset
            self.state_epoch = value.state_epoch
            start = value.start_offset
        else:
            old = self.offsets
            start = self.start_offset if value.start_offset < 0 else value.start_offset
            self.start_offset = start
            self.offsets = {o: s for o, s in old.items() if o >= start}
        self.leader_epoch = value.leader_epoch
        self.updated = timestamp
        for first, last, state, count in value.state_batches:
            lo = max(first, start)
            if last - lo + 1 > MAX_TRACKED:
                return f"state batch {first}..{last} is wider than {MAX_TRACKED} offsets: not tracked"
            for offset in range(lo, last + 1):
                before = old.get(offset)
                self.offsets[offset] = (state, count)
                if offset < known:
                    continue
                seen = self.max_seen.get(offset, 0)
                if count > seen:
                    if count >= 2:
                        self.redeliveries += count - max(seen, 1)
                    self.max_seen[offset] = count
                if state == ARCHIVED and (before is None or before[0] != ARCHIVED):
                    self.archived_total += 1
                    if count >= limit:
                        self.archived_at_limit += 1
        while self.start_offset in self.offsets and self.offsets[self.start_offset][0] in (ACKNOWLEDGED, ARCHIVED):
            del self.offsets[self.start_offset]    # Kafka's rule (and a reload's): the SPSO moves over the
            self.start_offset += 1                 # settled prefix; the next write persists the move
        for offset in [o for o in self.max_seen if o < self.start_offset]:
            del self.max_seen[offset]
        return None

    def to_json(self, log_end_offset: Optional[int]) -> dict[str, Any]:
        counts = {"available": 0, "delivered": 0, "acknowledged": 0, "archived": 0}
        redelivered, top = 0, 0
        for state, count in self.offsets.values():
            if state == ACKNOWLEDGED:
                counts["acknowledged"] += 1
            elif state == ARCHIVED:
                counts["archived"] += 1
            elif state == AVAILABLE and count > 0:
                counts["delivered"] += 1
            else:
                counts["available"] += 1
            redelivered += count >= 2
            top = max(top, count)
        end = max(self.offsets) if self.offsets else None
        return {"start_offset": self.start_offset, "end_offset": end,
                "in_flight": (end - self.start_offset + 1) if end is not None else 0,
                **counts, "redelivered": redelivered, "max_delivery_count": top,
                "redeliveries": self.redeliveries, "archived_total": self.archived_total,
                "archived_at_limit": self.archived_at_limit, "log_end_offset": log_end_offset,
                "not_yet_fetched": (None if log_end_offset is None
                                    else max(log_end_offset - (end + 1 if end is not None else self.start_offset), 0)),
                "state_epoch": self.state_epoch, "leader_epoch": self.leader_epoch}


class ShareGroupsModel:
    """Folds share group records and ``__share_group_state`` into what the page shows (module docstring)."""

    def __init__(self, delivery_count_limit: int = DELIVERY_COUNT_LIMIT) -> None:
        self.delivery_count_limit = delivery_count_limit
        self.records: dict[bytes, tuple] = {}
        """key bytes -> (ShareGroupKey, value): the latest share group record per key."""
        self.partitions: dict[tuple[str, uuid.UUID, int], _PartitionState] = {}
        """(group, topic id, partition) -> its delivery state."""
        self.touched: dict[str, tuple[int, int]] = {}
        self.updated: dict[str, int] = {}
        self.rebalances: deque = deque(maxlen=30)
        self.problems: deque = deque(maxlen=20)
        self.skipped = 0
        self._applied = 0
        self._epochs_seen: dict[str, tuple[int, dict[str, str]]] = {}
        """group -> (target assignment epoch, member id -> label) at its last new target epoch."""

    @staticmethod
    def is_share_group_key(key: Optional[bytes]) -> bool:
        """Whether a ``__consumer_offsets`` key is a share group's (types 10..15)."""
        return sgl.is_share_group_key(key)

    def _touch(self, group: str, timestamp: int) -> None:
        self._applied += 1
        before = self.touched.get(group, (timestamp, 0))
        self.touched[group] = (max(before[0], timestamp), self._applied)
        self.updated[group] = timestamp

    def apply_group_record(self, key: bytes, value: Optional[bytes], timestamp: int) -> None:
        """One share group record of ``__consumer_offsets``."""
        try:
            k = sgl.decode_key(key)
            v = sgl.decode_value(k.type, value)
        except CorruptRecordError:
            self.skipped += 1
            return
        if v is None:
            self.records.pop(bytes(key), None)
            if k.type == sgl.SHARE_GROUP_METADATA:      # the group is deleted
                self.touched.pop(k.group_id, None)
                self.updated.pop(k.group_id, None)
                self._epochs_seen.pop(k.group_id, None)
            return
        self.records[bytes(key)] = (k, v)
        self._touch(k.group_id, timestamp)
        if k.type == sgl.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA:
            self._new_target(k.group_id, v.assignment_epoch, timestamp)

    def apply_state_record(self, key: Optional[bytes], value: Optional[bytes], timestamp: int) -> None:
        """One record of ``__share_group_state``."""
        if key is None:
            self.skipped += 1
            return
        try:
            k = ssl.decode_key(key)
            v = ssl.decode_value(k.type, value)
        except CorruptRecordError:
            self.skipped += 1
            return
        where = (k.group_id, k.topic_id, k.partition)
        if v is None:
            self.partitions.pop(where, None)
            return
        state = self.partitions.get(where)
        if state is None:
            state = self.partitions[where] = _PartitionState()
        problem = state.apply(v, timestamp, self.delivery_count_limit)
        if problem:
            self.problems.append(f"{ssl.SHARE_GROUP_STATE_TOPIC} {k.group_id} {kafka_uuid(k.topic_id)}-{k.partition}: "
                                 f"{problem}")
        self._touch(k.group_id, timestamp)

    # -- the groups ----------------------------------------------------------------------------
    def _by_group(self, only: Optional[str] = None) -> dict[str, dict[int, dict]]:
        out: dict[str, dict[int, dict]] = {}
        for k, v in self.records.values():
            if only is None or k.group_id == only:
                out.setdefault(k.group_id, {}).setdefault(k.type, {})[k.member_id] = v
        return out

    def groups(self, topic_names: Mapping[uuid.UUID, str] = {}, only: Optional[str] = None) -> dict[str, dict]:
        """group id -> ``group_epoch``, ``assignment_epoch``, ``state`` and ``members`` (each with
        ``member_id``, ``client_id``, ``client_host``, ``rack_id``, ``member_epoch``,
        ``subscribed_topic_names``, ``assigned`` and ``target``: sorted (topic, partition)), and
        ``names``: topic id -> name (from ``topic_names``, else the group's type 15 record)."""
        out = {}
        for gid, by_type in sorted(self._by_group(only).items()):
            epoch = by_type.get(sgl.SHARE_GROUP_METADATA, {}).get(None)
            if epoch is None:
                continue
            names = dict(topic_names)
            meta = by_type.get(sgl.SHARE_GROUP_STATE_PARTITION_METADATA, {}).get(None)
            for tid, name, _ in (meta.initialized if meta else ()):
                names.setdefault(tid, name)
            for tid, name in (meta.deleting if meta else ()):
                names.setdefault(tid, name)
            target_meta = by_type.get(sgl.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, {}).get(None)
            targets = by_type.get(sgl.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, {})
            current = by_type.get(sgl.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, {})

            def pairs(assignment) -> list[tuple[str, int]]:
                return sorted((names.get(t, kafka_uuid(t)), int(p)) for t, ps in (assignment or {}).items() for p in ps)
            members = []
            for mid, m in sorted(by_type.get(sgl.SHARE_GROUP_MEMBER_METADATA, {}).items()):
                a, t = current.get(mid), targets.get(mid)
                members.append({"member_id": mid, "client_id": m.client_id, "client_host": m.client_host or None,
                                "rack_id": m.rack_id, "subscribed_topic_names": sorted(m.subscribed_topic_names),
                                "member_epoch": a.member_epoch if a else 0,
                                "assigned": pairs(a.assigned_partitions if a else {}),
                                "target": pairs(t.topic_partitions if t else {})})
            out[gid] = {"group_id": gid, "group_epoch": epoch.epoch,
                        "assignment_epoch": target_meta.assignment_epoch if target_meta else 0,
                        "state": STABLE if members else EMPTY, "members": members, "names": names}
        return out

    def _new_target(self, group: str, epoch: int, timestamp: int) -> None:
        """A new target assignment epoch: listed as the group's rebalance, with who joined and left."""
        before = self._epochs_seen.get(group)
        if before is not None and before[0] == epoch:
            return
        g = self.groups(only=group).get(group)
        members = g["members"] if g else []
        labels = {m["member_id"]: member_label(m) for m in members}
        old = before[1] if before else {}
        self._epochs_seen[group] = (epoch, labels)
        self.rebalances.append({
            "group": group, "type": SHARE, "generation": epoch, "timestamp": timestamp, "protocol": ASSIGNOR,
            "members": list(labels.values()),
            "joined": [lab for mid, lab in labels.items() if mid not in old],
            "left": [lab for mid, lab in old.items() if mid not in labels], "moved": []})

    def to_json(self, log_end_offsets: Mapping[tuple[str, int], int], color_of: Callable[[dict], int],
                topic_names: Mapping[uuid.UUID, str] = {}) -> list[dict[str, Any]]:
        """Every share group, sorted by id, shaped as :meth:`GroupsModel.to_json`'s groups
        (``type`` ``share``, ``generation`` its group epoch, ``protocol`` the assignor, members with
        a ``color`` from ``color_of`` and ``assignment``: what each fetches from, ``committed``
        empty: a share group commits no offsets), plus ``group_epoch``, ``assignment_epoch``,
        ``share_partitions`` (module docstring; each with ``members``: the labels of the members
        assigned it), ``redeliveries`` and ``archived_at_limit`` (the sums over its partitions)
        and ``delivery_count_limit``."""
        out = []
        for gid, g in self.groups(topic_names).items():
            names = g["names"]
            labels = {m["member_id"]: member_label(m) for m in g["members"]}
            fetchers: dict[tuple[str, int], list[str]] = {}
            members = []
            for m in g["members"]:
                for tp in m["assigned"]:
                    fetchers.setdefault(tp, []).append(labels[m["member_id"]])
                members.append({
                    "member_id": m["member_id"], "client_id": m["client_id"], "client_host": m["client_host"],
                    "group_instance_id": None, "rack_id": m["rack_id"], "label": labels[m["member_id"]],
                    "color": color_of(m), "assignment": [[t, p] for t, p in m["assigned"]],
                    "target_assignment": [[t, p] for t, p in m["target"]],
                    "subscribed_topic_names": m["subscribed_topic_names"], "member_epoch": m["member_epoch"],
                    "partitions": []})
            states = {(names.get(tid, kafka_uuid(tid)), p): st
                      for (group, tid, p), st in self.partitions.items() if group == gid}
            parts = []
            for tp in sorted(set(states) | set(fetchers)):
                st = states.get(tp)
                row = st.to_json(log_end_offsets.get(tp)) if st is not None else None
                parts.append({"topic": tp[0], "partition": tp[1], "initialized": row is not None,
                              "members": fetchers.get(tp, []), **(row or {})})
            for m in members:       # per partition it fetches from: that share-partition's numbers
                mine = {tuple(x) for x in m["assignment"]}
                m["partitions"] = [dict(x, position=None, committed=None, lag=None) for x in parts
                                   if (x["topic"], x["partition"]) in mine]
            out.append({"group_id": gid, "type": SHARE, "generation": g["group_epoch"], "group_epoch": g["group_epoch"],
                        "assignment_epoch": g["assignment_epoch"], "protocol": ASSIGNOR, "protocol_type": SHARE,
                        "leader": None, "state": g["state"], "updated": self.updated.get(gid),
                        "touched": self.touched.get(gid), "members": members, "committed": [],
                        "positions_known": False, "share_partitions": parts,
                        "redeliveries": sum(x.get("redeliveries", 0) for x in parts),
                        "archived_at_limit": sum(x.get("archived_at_limit", 0) for x in parts),
                        "delivery_count_limit": self.delivery_count_limit})
        return out
