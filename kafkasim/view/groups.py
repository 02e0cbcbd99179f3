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

Thread-safety: not thread-safe; one owner feeds and reads it.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Optional

from kafkasim.errors import CorruptRecordError
from kafkasim.protocol import consumer_group_log as cgl
from kafkasim.protocol.offsets import GroupKey, OffsetKey, decode_record

__all__ = ["GroupsModel"]

MAX_REBALANCES = 30


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

    def color_of(self, member: dict) -> int:
        ident = member.get("group_instance_id") or member.get("member_id") or ""
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

    def to_json(self, log_end_offsets: dict[tuple[str, int], int],
                positions: Optional[dict[tuple, tuple[int, int]]] = None) -> list[dict[str, Any]]:
        """Every group, sorted by id: generation, members with what each owns and its colour,
        committed offsets and lag per partition, and per member and owned partition its
        position and committed offset when known.

        Lag is Kafka's (``kafka-consumer-groups --describe``): log end offset minus the
        committed offset, so a live consumer that has read everything but not committed yet
        shows a lag. The position (the next offset the member reads) is no log's: for a served
        group it is the member's last fetch offset, from ``positions`` (``(client id, client
        host, topic, partition) -> (offset, at_ms)``, written by ``kafkasim serve``); matched to
        the member with that client id and host that owns the partition; None otherwise."""
        positions = positions or {}
        out = []
        for gid in sorted(set(self.groups) | set(self.offsets)):
            value = self.groups.get(gid) or {}
            members = []
            commits = self.offsets.get(gid, {})
            for m in value.get("members") or []:
                if not isinstance(m, dict):
                    continue
                owned = []
                for t, p in _pairs(m.get("assignment")):
                    fetched = positions.get((m.get("client_id"), m.get("client_host"), t, p))
                    off = commits.get((t, p))
                    leo = log_end_offsets.get((t, p))
                    owned.append({"topic": t, "partition": p,
                                  "position": fetched[0] if fetched else None,
                                  "fetched_at_ms": fetched[1] if fetched else None,
                                  "committed": off,
                                  "lag": None if off is None or leo is None else max(leo - off, 0)})
                members.append({
                    "member_id": m.get("member_id"), "client_id": m.get("client_id"),
                    "client_host": m.get("client_host"), "group_instance_id": m.get("group_instance_id"),
                    "label": member_label(m), "color": self.color_of(m),
                    "assignment": [[t, p] for t, p in _pairs(m.get("assignment"))],
                    "partitions": owned})
            committed = []
            for (t, p), off in sorted(self.offsets.get(gid, {}).items()):
                leo = log_end_offsets.get((t, p))
                committed.append({"topic": t, "partition": p, "offset": off,
                                  "lag": None if leo is None else max(leo - off, 0)})
            out.append({"group_id": gid, "generation": value.get("generation"),
                        "protocol": value.get("protocol"), "protocol_type": value.get("protocol_type"),
                        "leader": value.get("leader"), "state": "Stable" if members else "Empty",
                        "updated": self.updated.get(gid), "touched": self.touched.get(gid),
                        "members": members, "committed": committed,
                        "positions_known": any(x["position"] is not None for m in members for x in m["partitions"])})
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
