"""A share group (KIP-932) as the records Kafka's coordinator keeps in ``__consumer_offsets``, and back.

:func:`share_group_records` writes a group's whole state as Kafka's records (types 10..15 of
:mod:`kafkasim.protocol.share_group_log`), keyed by their key bytes; the records to append
between two states are :func:`kafkasim.coordinator.consumer_group_records.changes` with
:data:`SHARE_GROUP_KINDS` (Kafka's order: removed members' tombstones, member metadata, the
initialized share-partitions, the group epoch, target members, the target epoch, current
assignments; a deleted group's tombstones last). :func:`share_groups_from_records` rebuilds
groups from the latest record per key (the loader's replay); a group exists when its epoch
record (11) does. Pure functions; thread-safe.
"""

from __future__ import annotations

import uuid
from typing import Mapping, Optional

from kafkasim.coordinator.share_group import ShareGroup, ShareGroupMember
from kafkasim.protocol import share_group_log as sgl

__all__ = ["SHARE_GROUP_KINDS", "share_group_records", "share_groups_from_records"]

SHARE_GROUP_KINDS = (sgl.SHARE_GROUP_MEMBER_METADATA, sgl.SHARE_GROUP_STATE_PARTITION_METADATA,
                     sgl.SHARE_GROUP_METADATA, sgl.SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER,
                     sgl.SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, sgl.SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT)
"""The roles of :data:`~kafkasim.coordinator.consumer_group_records.CONSUMER_GROUP_KINDS`, a share group's types."""


def share_group_records(group: Optional[ShareGroup], topic_ids: Mapping[str, uuid.UUID]) -> dict:
    """key bytes -> (ShareGroupKey, value bytes) of every record that holds ``group`` now
    (empty for None: a deleted group). ``topic_ids`` maps topic names to ids; assignments of
    topics not in it are left out."""
    if group is None:
        return {}
    out: dict = {}

    def put(key: sgl.ShareGroupKey, value) -> None:
        out[sgl.encode_key(key)] = (key, sgl.encode_value(value))

    def by_id(assignment: Mapping[str, frozenset[int]]) -> dict:
        return {topic_ids[t]: tuple(sorted(ps)) for t, ps in assignment.items() if t in topic_ids and ps}

    gid = group.group_id
    put(sgl.ShareGroupKey(11, gid), sgl.ShareGroupEpoch(group.group_epoch))
    put(sgl.ShareGroupKey(12, gid), sgl.ShareTargetAssignmentEpoch(group.assignment_epoch))
    put(sgl.ShareGroupKey(15, gid), sgl.ShareStatePartitionMetadata(tuple(
        (topic_ids[t], t, tuple(sorted(ps))) for t, ps in sorted(group.initialized.items()) if t in topic_ids)))
    for mid, m in group.members.items():
        put(sgl.ShareGroupKey(10, gid, mid),
            sgl.ShareMemberMetadata(m.rack_id, m.client_id, m.client_host, m.subscribed_topic_names))
        put(sgl.ShareGroupKey(13, gid, mid), sgl.ShareTargetAssignmentMember(by_id(group.target.get(mid, {}))))
        put(sgl.ShareGroupKey(14, gid, mid),
            sgl.ShareCurrentMemberAssignment(m.member_epoch, m.previous_member_epoch, 0, by_id(m.assignment)))
    return out


def share_groups_from_records(records: Mapping[bytes, tuple], topic_names: Mapping[uuid.UUID, str]
                              ) -> dict[str, ShareGroup]:
    """Groups rebuilt from ``key bytes -> (ShareGroupKey, decoded value)`` (tombstoned keys
    absent); assignments of topics no longer in ``topic_names`` (id -> name) are dropped."""
    per_group: dict[str, dict[int, dict[Optional[str], object]]] = {}
    for key, value in records.values():
        per_group.setdefault(key.group_id, {}).setdefault(key.type, {})[key.member_id] = value

    def by_name(tps: Mapping[uuid.UUID, tuple]) -> dict[str, frozenset[int]]:
        return {topic_names[t]: frozenset(ps) for t, ps in tps.items() if t in topic_names}

    out = {}
    for gid, kinds in sorted(per_group.items()):
        epoch = kinds.get(11, {}).get(None)
        if epoch is None:
            continue
        target_epoch = kinds.get(12, {}).get(None)
        group = ShareGroup(gid, group_epoch=epoch.epoch,
                           assignment_epoch=target_epoch.assignment_epoch if target_epoch else 0)
        meta = kinds.get(15, {}).get(None)
        if meta is not None:
            group.initialized = {topic_names[t]: frozenset(ps) for t, _, ps in meta.initialized if t in topic_names}
        for mid, mm in sorted(kinds.get(10, {}).items()):
            cur = kinds.get(14, {}).get(mid)
            member = ShareGroupMember(mid, rack_id=mm.rack_id, client_id=mm.client_id, client_host=mm.client_host,
                                      subscribed_topic_names=tuple(mm.subscribed_topic_names))
            if cur is not None:
                member.member_epoch, member.previous_member_epoch = cur.member_epoch, cur.previous_member_epoch
                member.assignment = by_name(cur.assigned_partitions)
            group.members[mid] = member
            target = kinds.get(13, {}).get(mid)
            group.target[mid] = by_name(target.topic_partitions) if target is not None else {}
        out[gid] = group
    return out
