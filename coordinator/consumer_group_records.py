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

__all__ = ["group_records", "changes", "groups_from_records", "Records"]

Records = dict
"""key bytes -> (CgKey, value bytes)."""

_STATE_OF_BYTE = {b: MemberState(name) for name, b in cgl.MEMBER_STATE_BYTES.items()}


def group_records(group: Optional[ConsumerGroup],
                  client_of: Callable[[str], tuple[str, str]] = lambda member_id: ("", "")) -> Records:
    """Every record that holds ``group`` now (empty for None: a deleted group).
    ``client_of(member_id)`` is the member's (client id, client host)."""
    if group is None:
        return {}
    out: Records = {}

    def put(key: cgl.CgKey, value) -> None:
        out[cgl.encode_key(key)] = (key, cgl.encode_value(value))

    gid = group.group_id
    put(cgl.CgKey(3, gid), cgl.GroupEpoch(group.group_epoch))
    put(cgl.CgKey(4, gid), cgl.PartitionMetadata(tuple(
        (t.topic_id, t.name, t.num_partitions) for _, t in sorted(group.subscription_metadata.items()))))
    put(cgl.CgKey(6, gid), cgl.TargetAssignmentEpoch(group.assignment_epoch))
    for mid, m in sorted(group.members.items()):
        client_id, client_host = client_of(mid)
        put(cgl.CgKey(5, gid, mid), cgl.MemberMetadata(
            m.instance_id, m.rack_id, client_id, client_host, tuple(m.subscribed_topic_names),
            m.subscribed_topic_regex, m.rebalance_timeout_ms, m.server_assignor_name,
            None if m.classic_member_metadata is None else
            (m.classic_member_metadata.session_timeout_ms, m.classic_member_metadata.supported_protocols)))
        put(cgl.CgKey(8, gid, mid), cgl.CurrentMemberAssignment(
            m.member_epoch, m.previous_member_epoch, cgl.MEMBER_STATE_BYTES[m.state.value],
            {t: tuple(sorted(ps)) for t, ps in m.assigned_partitions.items()},
            {t: tuple(sorted(ps)) for t, ps in m.partitions_pending_revocation.items()}))
    for mid, target in sorted(group.target_assignment.items()):
        put(cgl.CgKey(7, gid, mid), cgl.TargetAssignmentMember({t: tuple(sorted(ps)) for t, ps in target.items()}))
    return out


def changes(before: Records, after: Records) -> list[tuple[bytes, Optional[bytes]]]:
    """The records to append to go from ``before`` to ``after`` (order in the module docstring)."""
    out: list[tuple[bytes, Optional[bytes]]] = []
    removed = sorted({k.member_id for k, _ in before.values() if k.type == 5}
                     - {k.member_id for k, _ in after.values() if k.type == 5})
    by_member = {(k.type, k.member_id): kb for kb, (k, _) in before.items()}
    for mid in removed:
        for t in (8, 7, 5):
            kb = by_member.get((t, mid))
            if kb is not None and kb not in after:
                out.append((kb, None))

    def changed_of(types, tombstones: bool) -> None:
        for kb, (k, vb) in sorted(after.items(), key=lambda kv: (kv[1][0].member_id or "")):
            if k.type in types and (kb not in before or before[kb][1] != vb):
                out.append((kb, vb))
        if tombstones:
            for kb, (k, _) in sorted(before.items(), key=lambda kv: (kv[1][0].member_id or "")):
                if k.type in types and kb not in after and (kb, None) not in out and k.member_id not in removed:
                    out.append((kb, None))

    changed_of((5,), False)
    if after:
        changed_of((4,), False)
        changed_of((3,), False)
    changed_of((7,), True)
    if after:
        changed_of((6,), False)
    changed_of((8,), False)
    if before and not after:
        for t in (6, 4, 3):
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
