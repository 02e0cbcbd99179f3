"""Consumer groups as ``__consumer_offsets`` records them: members, ownership, commits, rebalances.

:class:`GroupsModel` is fed the records of the offsets topic in offset order (by
:class:`kafkasim.view.snapshot.DataDirWatcher`, which reads them with
:class:`kafkasim.view.tail.PartitionTail`) and decodes each with the one codec,
:func:`kafkasim.protocol.offsets.decode_record`. What the coordinator writes there
(coordinator/rebalance.py, coordinator/offsets_store.py): a group metadata record each time
a rebalance completes (the group is Stable with every member's assignment) or the group
becomes Empty, and an offset commit record per committed partition.

Invariants:
- the latest record per key wins and a tombstone deletes the key (what compaction keeps);
- a group metadata record whose generation differs from the one seen before for that group
  is a rebalance: it is listed in :attr:`GroupsModel.rebalances` with the partitions whose
  owner changed (``from``/``to`` are member labels; None: no owner);
- a member's colour index is fixed the first time the member (its static instance id, else
  its member id) is seen, so a partition keeps its colour until its owner changes;
- a record that does not decode is counted in ``skipped`` and otherwise ignored, as the
  coordinator's own replay does.

A consumer group (KIP-848) is not a group metadata record but Kafka's records of types 3..8
(:mod:`kafkasim.protocol.consumer_group_log`), which the coordinator appends before it answers
each heartbeat that changed the group: its epoch (3), its target assignment epoch (6) and per
member its metadata (5), its target (7) and its current assignment (8: member epoch, state,
assigned partitions, partitions pending revocation). :meth:`GroupsModel.consumer_groups` folds
them into each group as the coordinator would reload it; :meth:`GroupsModel.to_json` adds what
a member has not reconciled yet, derived from who owns what now:

- a member **owns** its assigned partitions and those pending revocation (it still reads them
  until it acknowledges their revocation);
- **pending revocation**: owned, not in the member's target (``to``: the member whose target
  has it); the member has either not heartbeated since the new target or not acknowledged yet;
- **pending assignment**: in the member's target, not assigned to it yet (``from``: the member
  that still owns it, Kafka's *unreleased partition*; None: nobody owns it, the member gets it
  at its next heartbeat).

Each new target assignment epoch is listed in :attr:`GroupsModel.rebalances` as a classic
group's generation is, with the partitions whose target owner changed.

Thread-safety: not thread-safe; one owner feeds and reads it.
"""

from __future__ import annotations

import uuid
from collections import deque
from typing import Any, Mapping, Optional

from kafkasim.config import BROKER_CONFIGS
from kafkasim.errors import CorruptRecordError
from kafkasim.protocol import consumer_group_log as cgl
from kafkasim.protocol.offsets import GroupKey, OffsetKey, decode_record

__all__ = ["GroupsModel"]

MAX_REBALANCES = 30
DEFAULT_ASSIGNOR = str(BROKER_CONFIGS["group.consumer.assignors"].default).split(",")[0].strip()
"""The assignor a consumer group uses when no member names one (Kafka's first of ``group.consumer.assignors``)."""
CLASSIC, CONSUMER = "classic", "consumer"
"""Kafka's group types, as ListGroups v5 names them."""
_MEMBER_STATES = {b: name for name, b in cgl.MEMBER_STATE_BYTES.items()}


def member_label(m: dict) -> str:
    """``client_id`` and the member id's tail, e.g. ``c1 (…a3f2)``; the member id alone without a client id."""
    mid = str(m.get("member_id") or "")
    client = m.get("client_id") or ""
    short = mid if len(mid) <= 8 else "…" + mid[-6:]
    return f"{client} ({short})" if client else mid


class GroupsModel:
    """Folds ``__consumer_offsets`` records into the groups' current state (see module docstring)."""

    def __init__(self) -> None:
        self.groups: dict[str, dict] = {}                     # group -> latest metadata value
        self.updated: dict[str, int] = {}                     # group -> timestamp of that record
        self.offsets: dict[str, dict[tuple[str, int], int]] = {}
        self.rebalances: deque = deque(maxlen=MAX_REBALANCES)
        self.touched: dict[str, tuple[int, int]] = {}        # group -> (newest timestamp, record count)
        self.consumer_group_records: dict[bytes, tuple] = {}
        """key bytes -> (CgKey, value): the latest consumer group (KIP-848) record per key."""
        self.skipped = 0
        self._colors: dict[str, int] = {}
        self._applied = 0
        self._targets_seen: dict[str, tuple[int, dict, list]] = {}
        """group -> (target epoch, (topic id, partition) -> member id, members) at its last new target epoch."""

    def color_of(self, member: dict) -> int:
        ident = member.get("group_instance_id") or member.get("instance_id") or member.get("member_id") or ""
        return self._colors.setdefault(str(ident), len(self._colors))

    def apply(self, key: Optional[bytes], value: Optional[bytes], timestamp: int, offset: int) -> None:
        """One record of the offsets topic (``offset``: its offset, for ordering in the list)."""
        if key is None:
            self.skipped += 1
            return
        if cgl.is_consumer_group_key(key):
            try:
                ck = cgl.decode_key(key)
                cv = cgl.decode_value(ck.type, value)
            except CorruptRecordError:
                self.skipped += 1
                return
            if cv is None:
                self.consumer_group_records.pop(bytes(key), None)
            else:
                self.consumer_group_records[bytes(key)] = (ck, cv)
                self._applied += 1
                before = self.touched.get(ck.group_id, (timestamp, 0))
                self.touched[ck.group_id] = (max(before[0], timestamp), self._applied)
                self.updated[ck.group_id] = timestamp
                if ck.type == cgl.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
                    self._new_target(ck.group_id, cv.assignment_epoch, timestamp)
            return
        try:
            k, v = decode_record(key, value)
        except CorruptRecordError:
            self.skipped += 1
            return
        self._applied += 1
        if isinstance(k, (OffsetKey, GroupKey)) and v is not None:
            before = self.touched.get(k.group, (timestamp, 0))
            self.touched[k.group] = (max(before[0], timestamp), self._applied)
        if isinstance(k, OffsetKey):
            per_group = self.offsets.setdefault(k.group, {})
            if v is None:
                per_group.pop((k.topic, k.partition), None)
            else:
                per_group[(k.topic, k.partition)] = v.offset
        elif isinstance(k, GroupKey):
            self._apply_group(k.group, v, timestamp)

    def _apply_group(self, group: str, value: Optional[dict], timestamp: int) -> None:
        before = self.groups.get(group)
        if value is None:
            self.groups.pop(group, None)
            self.offsets.pop(group, None)
            self.updated.pop(group, None)
            self.touched.pop(group, None)
            return
        members = [m for m in value.get("members") or [] if isinstance(m, dict)]
        for m in members:
            self.color_of(m)
        self.groups[group] = value
        self.updated[group] = timestamp
        if before is not None and before.get("generation") == value.get("generation"):
            return
        old_owner = _owners(before)
        new_owner = _owners(value)
        moved = [{"topic": t, "partition": p, "from": old_owner.get((t, p)), "to": new_owner.get((t, p))}
                 for (t, p) in sorted(set(old_owner) | set(new_owner))
                 if old_owner.get((t, p)) != new_owner.get((t, p))]
        old_ids = {m.get("member_id") for m in (before or {}).get("members") or []}
        new_ids = {m.get("member_id") for m in members}
        self.rebalances.append({
            "group": group, "generation": value.get("generation"), "timestamp": timestamp,
            "protocol": value.get("protocol"), "members": [member_label(m) for m in members],
            "joined": [member_label(m) for m in members if m.get("member_id") not in old_ids],
            "left": [member_label(m) for m in (before or {}).get("members") or []
                     if m.get("member_id") not in new_ids],
            "moved": moved})

    # -- consumer groups (KIP-848) -------------------------------------------------------------
    def _records_by_group(self, only: Optional[str] = None) -> dict[str, dict[int, dict]]:
        """group id -> record type -> member id (None for a group's records) -> value."""
        per_group: dict[str, dict[int, dict]] = {}
        for k, v in self.consumer_group_records.values():
            if only is None or k.group_id == only:
                per_group.setdefault(k.group_id, {}).setdefault(k.type, {})[k.member_id] = v
        return per_group

    def consumer_groups(self, topic_names: Mapping[uuid.UUID, str] = {},
                        only: Optional[str] = None) -> dict[str, dict[str, Any]]:
        """group id -> the consumer group its records hold, as a restarted coordinator reloads
        it (a group exists while its epoch record, type 3, does): ``state`` (Kafka's: Empty,
        Assigning while the group epoch is ahead of the target's, Reconciling while a member is
        not stable at the target epoch, else Stable), ``group_epoch``, ``assignment_epoch``,
        ``assignor`` (the one most members ask for, else :data:`DEFAULT_ASSIGNOR`) and per member
        ``member_id``, ``instance_id``, ``client_id``, ``client_host``, ``member_epoch``,
        ``member_type`` (``classic`` for a classic member of a mixed group: its record carries
        ClassicMemberMetadata; else ``consumer``), ``member_state`` (Kafka's MemberState, lower
        case), and ``assigned``,
        ``pending_revocation`` and ``target``: sorted ``(topic, partition)`` pairs. A topic is
        named by ``topic_names`` (topic id -> name) or the group's subscription metadata (type 4);
        else by its id. ``only``: that group alone."""
        out: dict[str, dict[str, Any]] = {}
        for gid, by_type in sorted(self._records_by_group(only).items()):
            epoch = by_type.get(cgl.CONSUMER_GROUP_METADATA, {}).get(None)
            if epoch is None:
                continue
            names = dict(topic_names)
            for meta in by_type.get(cgl.CONSUMER_GROUP_PARTITION_METADATA, {}).values():
                names.update({t: n for t, n, _ in meta.topics if t not in names})
            target_meta = by_type.get(cgl.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, {}).get(None)
            target_epoch = target_meta.assignment_epoch if target_meta is not None else 0
            targets = by_type.get(cgl.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, {})
            current = by_type.get(cgl.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, {})

            def pairs(assignment) -> list[tuple[str, int]]:
                return sorted((names.get(t, cgl.kafka_uuid(t)), int(p)) for t, ps in (assignment or {}).items()
                              for p in ps)
            members, asked = [], {}
            for mid, m in sorted(by_type.get(cgl.CONSUMER_GROUP_MEMBER_METADATA, {}).items()):
                a = current.get(mid)
                t = targets.get(mid)
                members.append({
                    "member_id": mid, "instance_id": m.instance_id, "client_id": m.client_id,
                    "client_host": m.client_host or None, "member_epoch": a.member_epoch if a else 0,
                    "member_type": CONSUMER if m.classic_member_metadata is None else CLASSIC,
                    "member_state": _MEMBER_STATES.get(a.state, "unknown") if a else "unknown",
                    "assigned": pairs(a.assigned_partitions if a else {}),
                    "pending_revocation": pairs(a.partitions_pending_revocation if a else {}),
                    "target": pairs(t.topic_partitions if t else {})})
                if m.server_assignor:
                    asked[m.server_assignor] = asked.get(m.server_assignor, 0) + 1
            if not members:
                state = "Empty"
            elif epoch.epoch > target_epoch:
                state = "Assigning"
            elif any(m["member_state"] != "stable" or m["member_epoch"] != target_epoch for m in members):
                state = "Reconciling"
            else:
                state = "Stable"
            out[gid] = {"group_id": gid, "state": state, "group_epoch": epoch.epoch, "assignment_epoch": target_epoch,
                        "assignor": min(asked, key=lambda n: (-asked[n], n)) if asked else DEFAULT_ASSIGNOR,
                        "members": members}
        return out

    def _new_target(self, group: str, epoch: int, timestamp: int) -> None:
        """A target assignment epoch record: list it as a rebalance when the epoch is new."""
        before = self._targets_seen.get(group)
        if before is not None and before[0] == epoch:
            return
        g = self.consumer_groups(only=group).get(group)
        members = g["members"] if g else []
        label = {m["member_id"]: member_label(m) for m in members}
        owner = {tp: m["member_id"] for m in members for tp in m["target"]}
        old_owner, old_members = (before[1], before[2]) if before else ({}, [])
        old_label = {m["member_id"]: member_label(m) for m in old_members}
        names = {**old_label, **label}
        moved = [{"topic": t, "partition": p, "from": names.get(old_owner.get((t, p))),
                  "to": names.get(owner.get((t, p)))}
                 for (t, p) in sorted(set(old_owner) | set(owner)) if old_owner.get((t, p)) != owner.get((t, p))]
        self._targets_seen[group] = (epoch, owner, members)
        for m in members:
            self.color_of(m)
        self.rebalances.append({
            "group": group, "type": CONSUMER, "generation": epoch, "timestamp": timestamp,
            "protocol": g["assignor"] if g else None, "members": [label[m["member_id"]] for m in members],
            "joined": [label[m["member_id"]] for m in members if m["member_id"] not in old_label],
            "left": [old_label[mid] for mid in old_label if mid not in label],
            "moved": moved})

    def _consumer_group_json(self, g: dict, log_end_offsets, positions) -> dict[str, Any]:
        """One consumer group of :meth:`consumer_groups` as the snapshot shows it (module docstring)."""
        gid = g["group_id"]
        commits = self.offsets.get(gid, {})
        labels = {m["member_id"]: member_label(m) for m in g["members"]}
        owner = {tp: m["member_id"] for m in g["members"] for tp in m["assigned"] + m["pending_revocation"]}
        target_owner = {tp: m["member_id"] for m in g["members"] for tp in m["target"]}
        members = []
        for m in g["members"]:
            owned = sorted(set(m["assigned"]) | set(m["pending_revocation"]))
            target = set(m["target"])
            members.append({
                "member_id": m["member_id"], "client_id": m["client_id"], "client_host": m["client_host"],
                "group_instance_id": m["instance_id"], "label": labels[m["member_id"]], "color": self.color_of(m),
                "assignment": [[t, p] for t, p in owned],
                "partitions": _owned_rows(m, owned, commits, log_end_offsets, positions),
                "member_epoch": m["member_epoch"], "member_state": m["member_state"],
                "member_type": m["member_type"],
                "target_assignment": [[t, p] for t, p in m["target"]],
                "pending_revocation": [{"topic": t, "partition": p, "to": labels.get(target_owner.get((t, p)))}
                                       for t, p in owned if (t, p) not in target],
                "pending_assignment": [{"topic": t, "partition": p,
                                        "from": labels.get(owner.get((t, p))) if owner.get((t, p)) != m["member_id"]
                                        else None}
                                       for t, p in m["target"] if (t, p) not in set(m["assigned"])]})
        return {"group_id": gid, "type": CONSUMER, "generation": g["group_epoch"], "group_epoch": g["group_epoch"],
                "assignment_epoch": g["assignment_epoch"], "protocol": g["assignor"], "protocol_type": CONSUMER,
                "leader": None, "state": g["state"], "updated": self.updated.get(gid),
                "touched": self.touched.get(gid), "members": members, "committed": _committed(commits, log_end_offsets),
                "positions_known": any(x["position"] is not None for m in members for x in m["partitions"])}

    def to_json(self, log_end_offsets: dict[tuple[str, int], int],
                positions: Optional[dict[tuple, tuple[int, int]]] = None,
                topic_names: Mapping[uuid.UUID, str] = {}) -> list[dict[str, Any]]:
        """Every group, sorted by id: its ``type`` (``classic`` or ``consumer``), generation (a
        consumer group's: its group epoch), members with what each owns and its colour,
        committed offsets and lag per partition, and per member and owned partition its
        position and committed offset when known. A consumer group adds its epochs and per
        member its epoch, state, target and pending revocations and assignments (module
        docstring); ``topic_names`` (topic id -> name) names its topics.

        Lag is Kafka's (``kafka-consumer-groups --describe``): log end offset minus the
        committed offset, so a live consumer that has read everything but not committed yet
        shows a lag. The position (the next offset the member reads) is no log's: for a served
        group it is the member's last fetch offset, from ``positions`` (``(client id, client
        host, topic, partition) -> (offset, at_ms)``, written by ``kafkasim serve``); matched to
        the member with that client id and host that owns the partition; None otherwise."""
        positions = positions or {}
        consumer = self.consumer_groups(topic_names)
        out = []
        for gid in sorted(set(self.groups) | set(self.offsets) | set(consumer)):
            if gid in consumer:
                out.append(self._consumer_group_json(consumer[gid], log_end_offsets, positions))
                continue
            value = self.groups.get(gid) or {}
            members = []
            commits = self.offsets.get(gid, {})
            for m in value.get("members") or []:
                if not isinstance(m, dict):
                    continue
                owned = _pairs(m.get("assignment"))
                members.append({
                    "member_id": m.get("member_id"), "client_id": m.get("client_id"),
                    "client_host": m.get("client_host"), "group_instance_id": m.get("group_instance_id"),
                    "label": member_label(m), "color": self.color_of(m),
                    "assignment": [[t, p] for t, p in owned],
                    "partitions": _owned_rows(m, owned, commits, log_end_offsets, positions)})
            out.append({"group_id": gid, "type": CLASSIC, "generation": value.get("generation"),
                        "protocol": value.get("protocol"), "protocol_type": value.get("protocol_type"),
                        "leader": value.get("leader"), "state": "Stable" if members else "Empty",
                        "updated": self.updated.get(gid), "touched": self.touched.get(gid),
                        "members": members, "committed": _committed(commits, log_end_offsets),
                        "positions_known": any(x["position"] is not None for m in members for x in m["partitions"])})
        return out


def _owned_rows(m: dict, owned: list[tuple[str, int]], commits: dict, log_end_offsets: dict,
                positions: dict) -> list[dict[str, Any]]:
    """Per partition a member owns: its position (last fetch offset), committed offset and lag."""
    rows = []
    for t, p in owned:
        fetched = positions.get((m.get("client_id"), m.get("client_host"), t, p))
        off = commits.get((t, p))
        leo = log_end_offsets.get((t, p))
        rows.append({"topic": t, "partition": p,
                     "position": fetched[0] if fetched else None,
                     "fetched_at_ms": fetched[1] if fetched else None,
                     "committed": off,
                     "lag": None if off is None or leo is None else max(leo - off, 0)})
    return rows


def _committed(commits: dict, log_end_offsets: dict) -> list[dict[str, Any]]:
    out = []
    for (t, p), off in sorted(commits.items()):
        leo = log_end_offsets.get((t, p))
        out.append({"topic": t, "partition": p, "offset": off, "lag": None if leo is None else max(leo - off, 0)})
    return out


def _pairs(assignment: Any) -> list[tuple[str, int]]:
    out = []
    for tp in assignment or []:
        if isinstance(tp, (list, tuple)) and len(tp) == 2:
            out.append((str(tp[0]), int(tp[1])))
    return sorted(out)


def _owners(value: Optional[dict]) -> dict[tuple[str, int], str]:
    owners = {}
    for m in (value or {}).get("members") or []:
        if isinstance(m, dict):
            for tp in _pairs(m.get("assignment")):
                owners[tp] = member_label(m)
    return owners
