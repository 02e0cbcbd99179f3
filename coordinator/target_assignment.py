"""Computing a consumer group's target assignment through a server-side assignor (KIP-848).

Kafka's ``modern/TargetAssignmentBuilder``, restated as one pure function,
:func:`build_target_assignment`:

1. Start from every current member, each with its subscription (topic names resolved to
   topic ids through the subscription metadata; a topic that does not exist is left out)
   and its partitions in the current target (so the assignor can be sticky).
2. Apply the changes of this heartbeat: a removed member is dropped; an added or updated
   member replaces its entry. A static member that replaces a departed one (same
   ``group.instance.id``, new member id) starts from the departed member's target.
3. Call the assignor with a :class:`~kafkasim.assignors.group_spec.GroupSpec` and a
   :class:`~kafkasim.assignors.group_spec.TopicsImage` of the subscribed topics.
4. Return the new target (every member, empty for one given nothing) and the members whose
   target changed (Kafka writes one record for each, then the target epoch).

Worked example (Kafka's ``testDeleteMember``): members 1, 2, 3 hold foo/bar {1,2}, {3,4},
{5,6}; member 3 is removed; the assignor answers 1 -> {1,2,3}, 2 -> {4,5,6} on both
topics; the result is that target with both members changed.

A :class:`~kafkasim.assignors.group_spec.PartitionAssignorError` from the assignor
propagates; the heartbeat turns it into UNKNOWN_SERVER_ERROR with Kafka's message.

Pure and stateless; thread-safe.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Mapping, Optional

from kafkasim.assignors.group_spec import GroupSpec, MemberSubscription, ServerAssignor, TopicsImage
from kafkasim.coordinator.consumer_group import ConsumerGroupMember, TopicMetadata

__all__ = ["TargetAssignmentResult", "build_target_assignment", "topics_image"]


@dataclass(frozen=True)
class TargetAssignmentResult:
    """The new target (member id -> topic id -> partitions) and the members whose target changed."""

    target_assignment: dict[str, dict[uuid.UUID, frozenset[int]]]
    changed_members: tuple[str, ...]


def topics_image(subscription_metadata: Mapping[str, TopicMetadata]) -> TopicsImage:
    """The assignor's view of the subscribed topics: partition counts and replica racks by topic id."""
    return TopicsImage(
        partitions={m.topic_id: m.num_partitions for m in subscription_metadata.values()},
        racks={(m.topic_id, p): frozenset(r) for m in subscription_metadata.values() for p, r in m.racks.items()})


def build_target_assignment(
        assignor: ServerAssignor,
        members: Mapping[str, ConsumerGroupMember],
        topic_names: Mapping[str, frozenset[str]],
        subscription_metadata: Mapping[str, TopicMetadata],
        subscription_type: str,
        target_assignment: Mapping[str, Mapping[uuid.UUID, frozenset[int]]],
        static_members: Optional[Mapping[str, str]] = None,
        updated: Optional[Mapping[str, Optional[ConsumerGroupMember]]] = None,
) -> TargetAssignmentResult:
    """Compute the target assignment (steps in the module docstring).

    ``topic_names`` gives each member's subscribed topic names (names plus what its regex
    resolved to), for the members of ``members`` and ``updated``; ``updated`` maps a member
    id to its new self, or to None when it leaves; ``static_members`` is instance id ->
    member id before this change.
    """
    static_members = static_members or {}

    def spec(member: ConsumerGroupMember, assigned: Mapping[uuid.UUID, frozenset[int]]) -> MemberSubscription:
        ids = frozenset(subscription_metadata[n].topic_id for n in topic_names.get(member.member_id, ())
                        if n in subscription_metadata)
        return MemberSubscription(subscribed_topic_ids=ids, assigned_partitions=dict(assigned),
                                  rack_id=member.rack_id, instance_id=member.instance_id)

    specs: dict[str, MemberSubscription] = {
        member_id: spec(member, target_assignment.get(member_id, {})) for member_id, member in members.items()}
    for member_id, member in (updated or {}).items():
        if member is None:
            specs.pop(member_id, None)
            continue
        assigned = target_assignment.get(member_id, {})
        previous = static_members.get(member.instance_id) if member.instance_id is not None else None
        if previous is not None and previous != member_id:
            assigned = target_assignment.get(previous, {})
        specs[member_id] = spec(member, assigned)

    result = assignor.assign(GroupSpec(members=dict(sorted(specs.items())), subscription_type=subscription_type),
                             topics_image(subscription_metadata))
    new_target = {member_id: {t: frozenset(ps) for t, ps in result.get(member_id, {}).items() if ps}
                  for member_id in sorted(specs)}
    changed = tuple(member_id for member_id, a in new_target.items()
                    if member_id not in target_assignment or a != {t: frozenset(ps) for t, ps in
                                                                   target_assignment[member_id].items() if ps})
    return TargetAssignmentResult(target_assignment=new_target, changed_members=changed)
