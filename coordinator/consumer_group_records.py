"""A consumer group (KIP-848) as the records Kafka's coordinator keeps in ``__consumer_offsets``, and back.

:func:`group_records` writes a group's whole state as Kafka's records (types 3..8 of
:mod:`kafkasim.protocol.consumer_group_log`), keyed by their key bytes; :func:`changes`
turns the records before and after a call into what Kafka's ``GroupCoordinatorRecordHelpers``
would append, in Kafka's order:

1. for each removed member: tombstones of its current assignment (8), target (7), metadata (5);
2. member metadata (5) that changed; the subscribed topics (4); the group epoch (3);
3. target assignment members (7) that changed (tombstones for removed targets), then the target
   epoch (6); 4. current member assignments (8) that changed;
5. a deleted group: tombstones of 6, 4 and 3 (Kafka's ``createGroupTombstoneRecords``).

:func:`groups_from_records` rebuilds groups from the latest record per key (the loader's
replay). Pure functions; thread-safe.
"""

from __future__ import annotations

import uuid
from typing import Callable, Mapping, Optional

from kafkasim.coordinator.consumer_group import (
    ClassicMemberMetadata, ConsumerGroup, ConsumerGroupMember, MemberState, TopicMetadata,
)
from kafkasim.protocol import consumer_group_log as cgl

__all__ = ["group_records", "changes", "groups_from_records", "Records", "CONSUMER_GROUP_KINDS"]

Records = dict
"""key bytes -> (CgKey, value bytes)."""

_STATE_OF_BYTE = {b: MemberState(name) for name, b in cgl.MEMBER_STATE_BYTES.items()}


def group_records(group: Optional[ConsumerGroup],
                  client_of: Callable[[str], tuple[str, str]] = lambda member_id: ("", ""),
                  cache: Optional[dict] = None) -> Records:
    """Every record that holds ``group`` now (empty for None: a deleted group).
    ``client_of(member_id)`` is the member's (client id, client host). ``cache`` (a dict the
    caller keeps per group) remembers each member's encoded records against the member and
    target objects they were encoded from (both are replaced, never changed, when they change),
    so a heartbeat re-encodes only what it changed, not the whole group."""
    if group is None:
        return {}
    out: Records = {}

    def put(into: Records, key: cgl.CgKey, value) -> None:
        into[cgl.encode_key(key)] = (key, cgl.encode_value(value))

    gid = group.group_id
    put(out, cgl.CgKey(3, gid), cgl.GroupEpoch(group.group_epoch))
    put(out, cgl.CgKey(4, gid), cgl.PartitionMetadata(tuple(
        (t.topic_id, t.name, t.num_partitions) for _, t in sorted(group.subscription_metadata.items()))))
    put(out, cgl.CgKey(6, gid), cgl.TargetAssignmentEpoch(group.assignment_epoch))
    for mid, m in group.members.items():      # record order does not matter: changes() sorts
        client = client_of(mid)
        hit = cache.get(("member", mid)) if cache is not None else None
        if hit is not None and hit[0] is m and hit[1] == client:
            out.update(hit[2])
            continue
        recs: Records = {}
        put(recs, cgl.CgKey(5, gid, mid), cgl.MemberMetadata(
            m.instance_id, m.rack_id, client[0], client[1], tuple(m.subscribed_topic_names),
            m.subscribed_topic_regex, m.rebalance_timeout_ms, m.server_assignor_name,
            None if m.classic_member_metadata is None else
            (m.classic_member_metadata.session_timeout_ms, m.classic_member_metadata.supported_protocols)))
        put(recs, cgl.CgKey(8, gid, mid), cgl.CurrentMemberAssignment(
            m.member_epoch, m.previous_member_epoch, cgl.MEMBER_STATE_BYTES[m.state.value],
            {t: tuple(sorted(ps)) for t, ps in m.assigned_partitions.items()},
            {t: tuple(sorted(ps)) for t, ps in m.partitions_pending_revocation.items()}))
        if cache is not None:
            cache[("member", mid)] = (m, client, recs)
        out.update(recs)
    for mid, target in group.target_assignment.items():
        hit = cache.get(("target", mid)) if cache is not None else None
        if hit is not None and hit[0] is target:
            out.update(hit[1])
            continue
        recs = {}
        put(recs, cgl.CgKey(7, gid, mid), cgl.TargetAssignmentMember(
            {t: tuple(sorted(ps)) for t, ps in target.items()}))
        if cache is not None:
            cache[("target", mid)] = (target, recs)
        out.update(recs)
    if cache is not None and len(cache) > 2 * (len(group.members) + len(group.target_assignment)) + 16:
        for key in [k for k in cache if k[1] not in group.members and k[1] not in group.target_assignment]:
            del cache[key]        # members gone for good
    return out


CONSUMER_GROUP_KINDS = (5, 4, 3, 7, 6, 8)
"""The record types :func:`changes` orders, for a consumer group: member metadata, subscribed
topics, group epoch, target member, target epoch, current member assignment."""


def changes(before: Records, after: Records,
            kinds: tuple[int, int, int, int, int, int] = CONSUMER_GROUP_KINDS) -> list[tuple[bytes, Optional[bytes]]]:
    """The records to append to go from ``before`` to ``after`` (order in the module docstring).
    Looks at every record once; only what changed is sorted (a heartbeat changes a few records
    of a group that may hold hundreds). ``kinds`` names the record types in the roles of
    :data:`CONSUMER_GROUP_KINDS` (a share group's are 10, 15, 11, 13, 12, 14)."""
    member_kind, topics_kind, epoch_kind, target_kind, target_epoch_kind, current_kind = kinds
    out: list[tuple[bytes, Optional[bytes]]] = []
    changed = [(kb, k, vb) for kb, (k, vb) in after.items()
               if (old := before.get(kb)) is None or old[1] != vb]
    gone = [(kb, k) for kb, (k, _) in before.items() if kb not in after]
    removed = sorted(k.member_id for _, k in gone if k.type == member_kind)
    gone_by_member = {(k.type, k.member_id): kb for kb, k in gone}
    for mid in removed:
        for t in (current_kind, target_kind, member_kind):
            kb = gone_by_member.get((t, mid))
            if kb is not None:
                out.append((kb, None))
    removed_set = set(removed)

    def by_member(entry) -> str:
        return entry[1].member_id or ""

    def changed_of(record_type: int, tombstones: bool) -> None:
        out.extend((kb, vb) for kb, _, vb in sorted((c for c in changed if c[1].type == record_type), key=by_member))
        if tombstones:
            out.extend((kb, None) for kb, _ in sorted(
                (g for g in gone if g[1].type == record_type and g[1].member_id not in removed_set), key=by_member))

    changed_of(member_kind, False)
    if after:
        changed_of(topics_kind, False)
        changed_of(epoch_kind, False)
    changed_of(target_kind, True)
    if after:
        changed_of(target_epoch_kind, False)
    changed_of(current_kind, False)
    if before and not after:
        for t in (target_epoch_kind, topics_kind, epoch_kind):
            out += [(kb, None) for kb, (k, _) in before.items() if k.type == t]
    return out


def groups_from_records(records: Mapping[bytes, tuple[cgl.CgKey, object]],
                        topics: Mapping[uuid.UUID, TopicMetadata] = {}) -> dict[str, tuple[ConsumerGroup, dict]]:
    """Groups rebuilt from the latest decoded value per key (``key bytes -> (CgKey, value)``,
    tombstoned keys absent): group id -> (the group, member id -> (client id, client host)).
    A group exists when its epoch record (3) does, as in Kafka's replay."""
    per_group: dict[str, dict[int, dict[Optional[str], object]]] = {}
    for k, v in records.values():
        per_group.setdefault(k.group_id, {}).setdefault(k.type, {})[k.member_id] = v
    out: dict[str, tuple[ConsumerGroup, dict]] = {}
    for gid, by_type in sorted(per_group.items()):
        epoch = by_type.get(3, {}).get(None)
        if epoch is None:
            continue
        group = ConsumerGroup(gid)
        clients: dict[str, tuple[str, str]] = {}
        meta = by_type.get(4, {}).get(None)
        if meta is not None:
            group.subscription_metadata = {name: TopicMetadata(t, name, n) for t, name, n in meta.topics}
        target_epoch = by_type.get(6, {}).get(None)
        group.set_target_assignment(target_epoch.assignment_epoch if target_epoch else 0,
                                    {mid: v.topic_partitions for mid, v in by_type.get(7, {}).items()})
        current = by_type.get(8, {})
        for mid, m in sorted(by_type.get(5, {}).items()):
            a = current.get(mid)
            member = ConsumerGroupMember(
                mid, instance_id=m.instance_id, rack_id=m.rack_id, rebalance_timeout_ms=m.rebalance_timeout_ms,
                subscribed_topic_names=m.subscribed_topic_names, subscribed_topic_regex=m.subscribed_topic_regex,
                server_assignor_name=m.server_assignor,
                classic_member_metadata=None if m.classic_member_metadata is None
                else ClassicMemberMetadata(*m.classic_member_metadata))
            if a is not None:
                member = member.replace(member_epoch=a.member_epoch, previous_member_epoch=a.previous_member_epoch,
                                        state=_STATE_OF_BYTE.get(a.state, MemberState.UNKNOWN),
                                        assigned_partitions=a.assigned_partitions,
                                        partitions_pending_revocation=a.partitions_pending_revocation)
            group.update_member(member)
            clients[mid] = (m.client_id, m.client_host)
        group.set_group_epoch(epoch.epoch)
        out[gid] = (group, clients)
    return out
