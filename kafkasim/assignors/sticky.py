"""Kafka's ``StickyAssignor`` (``sticky``) and ``CooperativeStickyAssignor`` (``cooperative-sticky``).

Both follow Kafka's ``AbstractStickyAssignor``: the assignment is as balanced as
possible first, and keeps as many partitions with their previous owner as possible
second.  Previous ownership comes from each :class:`Subscription`'s
``owned_partitions`` and ``generation_id`` (Kafka's sticky assignor reads the same two
facts from its user data; the cooperative one from the subscription).  When several
members claim a partition, the highest generation wins; two claims in the same
generation are both discarded.

Worked example (Kafka's StickyAssignor javadoc, example 1): C0, C1, C2 subscribe to
t0..t3, 2 partitions each.  A fresh assignment is::

    C0: [t0p0, t1p1, t3p0]    C1: [t0p1, t2p0, t3p1]    C2: [t1p0, t2p1]

C1 leaves; the re-run with previous ownership keeps every surviving partition in place
and deals C1's three (t0p1, t2p0, t3p1) round robin to the members below quota::

    C0: [t0p0, t0p1, t1p1, t3p0]    C2: [t1p0, t2p0, t2p1, t3p1]

(The javadoc lists ``C0 [.., t2p0]  C2 [.., t0p1, ..]``, the output of the original 2017
algorithm; today's constrained algorithm, which kafkasim follows, gives the above.
Both keep every previous assignment.)

Algorithm (``assign``):

1. collect each member's previously owned partitions of existing topics; a partition
   claimed by several members goes to the highest generation (same generation: nobody);
   note whether all subscriptions are identical;
2. identical subscriptions -> the *constrained* algorithm (:func:`_constrained_assign`):
   quotas ``min = P // M``, ``max = ceil(P / M)``; each member keeps up to its quota of
   owned partitions (members in Kafka's ``HashMap`` order get the ``max`` slots first);
   the rest are dealt round robin to the members below quota (member ids sorted), then
   one each to members at ``min`` until ``P % M`` members hold ``max``;
3. otherwise the *general* algorithm (``_GeneralBuilder`` in
   :mod:`kafkasim.assignors.sticky_general`, its steps numbered there): keep owned partitions
   still subscribed; give each unassigned partition (topics with fewest subscribers
   first) to the least loaded eligible member; then move partitions from members with
   at least two more than an eligible member until balanced (preferring to return a
   partition to its previous owner, and to undo an earlier move rather than make a
   new one); keep the result only if it is more balanced than before the moves.

Rack awareness (KIP-881, Kafka >= 3.5 including KAFKA-15170), when ``partition_racks``
is given and :meth:`RackInfo.build` finds it useful (some member has a rack, some member's
rack holds a replica, some partition is not on every rack):

* constrained: in step 2 an owned partition with no replica on its owner's rack is not
  kept; the partitions left are ordered by how many members sit on their racks (fewest
  first, stable) and first dealt only on-rack: round robin to members below ``min``, else
  to the first member at ``min`` that may still take one more; what cannot be placed
  on-rack within the quotas then goes through the plain round robin;
* general: in step 3 an owned partition off its owner's rack is not kept (a revocation),
  and each unassigned partition first goes to the least loaded eligible member on one of
  its racks, then (if none) to the least loaded eligible member;
* a member without a rack matches every partition; balance always wins over racks.

Rack example (Kafka's ``testRackAwareAssignmentWithUniformSubscription``): t1 (6), t2 (7),
t3 (2), consumer0..2 on racks a, b, c, owning t1-0..t1-4 / t1-5, t2-0..t2-3 /
t2-4..t2-6, t3-0, t3-1 in generation -1, one replica per partition on rack ``"abc"[k % 3]``
for the k-th partition overall -> sticky moves every partition to its rack:
``consumer0: t1-0, t1-3, t2-0, t2-3, t2-6``, ``consumer1: t1-1, t1-4, t2-1, t2-4, t3-0``,
``consumer2: t1-2, t1-5, t2-2, t2-5, t3-1``; cooperative-sticky keeps only what stays
(``t1-0, t1-3`` / ``t2-1`` / ``t2-5, t3-1``) and assigns the rest in the follow-up round.

Cooperative-sticky (KIP-429) then withholds every partition that changes owner: it is
in nobody's list this round, its old owner revokes it, and the follow-up rebalance the
old owner triggers assigns it (see :func:`kafkasim.assignors.revoked_partitions`).

Member ordering and ties reproduce Kafka's, including its Java ``HashMap`` iteration
over member ids (:mod:`kafkasim.assignors._java`): for the same members joining in
the same order (``subscriptions`` insertion order), the output is Kafka's.

Deliberate differences: Kafka's assignor instance remembers the highest generation it
has seen across calls; these are pure and use the highest generation of this call.
Kafka's general algorithm may hand a partition back to its owner from an older
generation even when that member no longer subscribes to the topic (an invalid
assignment its consumer then rejects); kafkasim only returns it to a subscribed member.
Rack information is computed over the subscribed topics only (Kafka's consumer passes
only those; Kafka's assignor called directly with extra topics would count their racks).

Thread-safety: stateless (each call builds its own private working state;
``prefer_rack_aware_logic`` is fixed at construction); safe to share.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Mapping, Optional, Sequence

from kafkasim.errors import IllegalStateError
from kafkasim.types import TopicPartition

from kafkasim.assignors._java import hashmap_order
from kafkasim.assignors.base import (
    COOPERATIVE, DEFAULT_GENERATION, EAGER, PartitionRacks, RackAwareAssignor, Subscription, consumer_rack,
    java_order_is_python_order, java_str_key, replica_racks, sort_partitions, topic_partitions,
    use_rack_aware_assignment,
)
from kafkasim.assignors.sticky_general import _GeneralBuilder

__all__ = ["StickyAssignor", "CooperativeStickyAssignor", "sticky_assign", "RackInfo"]

Assignment = dict[str, list[TopicPartition]]


def _previous_owners(all_topics, subscriptions: Mapping[str, Subscription], order: list[str]):
    """Step 1: (all_equal, member -> owned partitions kept, doubly-claimed partitions, max generation)."""
    all_equal = True
    first_topics: Optional[frozenset] = None
    owned: dict[str, list[TopicPartition]] = {}
    owner_of: dict[TopicPartition, str] = {}
    multi: set[TopicPartition] = set()
    max_gen = DEFAULT_GENERATION
    for member in order:
        sub = subscriptions[member]
        topics = frozenset(sub.topics)
        if first_topics is None or not first_topics:
            first_topics = topics
        elif all_equal and topics != first_topics:
            all_equal = False
        gen = sub.generation_id
        max_gen = max(max_gen, gen)
        mine: list[TopicPartition] = []
        owned[member] = mine
        for tp in sub.owned_partitions:
            if tp[0] not in all_topics:
                continue
            if type(tp) is not TopicPartition:
                tp = TopicPartition(*tp)
            other = owner_of.get(tp)
            if other is None:
                owner_of[tp] = member
                mine.append(tp)
                continue
            # a second claim (from another member, or a duplicate in this member's own list)
            other_gen = subscriptions[other].generation_id
            if gen == other_gen:          # same generation: invalid, nobody keeps it
                multi.add(tp)
                if tp in owned[other]:
                    owned[other].remove(tp)
                owner_of[tp] = member
            elif gen > other_gen:         # the higher generation wins
                mine.append(tp)
                if tp in owned[other]:
                    owned[other].remove(tp)
                owner_of[tp] = member
    return all_equal, owned, multi, max_gen


class RackInfo:
    """Kafka's ``AbstractStickyAssignor.RackInfo``: member racks and replica racks, when they matter.

    Built only when rack-aware assignment applies (:meth:`build` returns ``None`` otherwise,
    and the sticky algorithms then run exactly as without racks).  ``mismatch(member, tp)``
    is true when the member has a rack and no replica of ``tp`` is on it.
    """

    __slots__ = ("member_racks", "partition_racks", "members_on_racks")

    def __init__(self, member_racks: dict[str, str], partition_racks: dict[TopicPartition, frozenset],
                 members_on_racks: dict[TopicPartition, int]) -> None:
        self.member_racks = member_racks
        self.partition_racks = partition_racks
        self.members_on_racks = members_on_racks   # Kafka's numConsumersByPartition

    @classmethod
    def build(cls, ppt: Mapping[str, int], subscriptions: Mapping[str, Subscription],
              partition_racks: Optional[PartitionRacks], prefer: bool = False) -> Optional["RackInfo"]:
        if partition_racks is None:
            return None
        members_by_rack: dict[str, list[str]] = {}
        for member, sub in subscriptions.items():
            rack = consumer_rack(sub)
            if rack is not None:
                members_by_rack.setdefault(rack, []).append(member)
        if not members_by_rack:
            return None
        racks_of = {tp: replica_racks(partition_racks, tp)
                    for t in ppt for tp in topic_partitions(t, 0, ppt[t])}
        all_racks = frozenset().union(*racks_of.values())
        if not use_rack_aware_assignment(members_by_rack.keys(), all_racks, racks_of.values(), prefer):
            return None
        member_racks = {m: rack for rack, ms in members_by_rack.items() for m in ms}
        members_on_racks = {tp: sum(len(members_by_rack.get(r, ())) for r in racks) for tp, racks in racks_of.items()}
        return cls(member_racks, racks_of, members_on_racks)

    def mismatch(self, member: str, tp: TopicPartition) -> bool:
        rack = self.member_racks.get(member)
        return rack is not None and rack not in self.partition_racks.get(tp, ())

    def next_on_rack(self, tp: TopicPartition, members: Sequence[str], first: int) -> int:
        """Index of the first member of ``members`` on a rack of ``tp``, cycling from ``first``; -1 if none."""
        racks = self.partition_racks.get(tp)
        n = len(members)
        if not racks or not n:
            return -1
        for i in range(n):
            index = (first + i) % n
            if self.member_racks.get(members[index]) in racks:
                return index
        return -1


def _constrained_assign(ppt: Mapping[str, int], owned: dict[str, list[TopicPartition]],
                        multi: set[TopicPartition], rack: Optional[RackInfo] = None
                        ) -> tuple[Assignment, dict[TopicPartition, str]]:
    """Step 2, identical subscriptions.  Returns (assignment, partitions changing owner -> new owner)."""
    total = sum(ppt.values())
    n = len(owned)
    min_q, max_q = total // n, -(-total // n)
    expected_over = total % n
    current_over = 0
    assignment: Assignment = {m: [] for m in owned}
    assigned: set[TopicPartition] = set()
    revoked: dict[TopicPartition, str] = {}   # owned partition not kept -> its owner (Kafka's maybeRevokedPartitions)
    under: list[str] = []          # unfilled members below minQuota
    exact: list[str] = []          # members at minQuota that may still take one more
    # 2a. keep owned partitions up to quota, in Kafka's HashMap order of members
    safe = java_order_is_python_order(ppt)
    by_partition = itemgetter(1, 0) if safe else (lambda tp: (tp[1], java_str_key(tp[0])))
    for member, mine in owned.items():
        if rack is not None:       # rack-aware: an owned partition off the member's rack is not kept
            misplaced = [tp for tp in mine if rack.mismatch(member, tp)]
            if misplaced:
                revoked.update(dict.fromkeys(misplaced, member))
                mine = [tp for tp in mine if not rack.mismatch(member, tp)]
        kept = sorted([tp for tp in mine if tp not in multi] if multi else mine, key=by_partition)
        target = assignment[member]
        if len(kept) < min_q:
            target.extend(kept)
            assigned.update(kept)
            under.append(member)
        elif len(kept) >= max_q and current_over < expected_over:
            current_over += 1
            if current_over == expected_over:
                exact.clear()
            target.extend(kept[:max_q])
            assigned.update(kept[:max_q])
            revoked.update(dict.fromkeys(kept[max_q:], member))
        else:
            target.extend(kept[:min_q])
            assigned.update(kept[:min_q])
            revoked.update(dict.fromkeys(kept[min_q:], member))
            if current_over < expected_over:
                exact.append(member)
    unassigned: list[TopicPartition] = []
    for t in sorted(ppt, key=java_str_key):
        tps = topic_partitions(t, 0, ppt[t])
        unassigned.extend([tp for tp in tps if tp not in assigned] if assigned else tps)
    under.sort(key=java_str_key)
    exact.sort(key=java_str_key)
    transferring: dict[TopicPartition, str] = {}

    if rack is not None:
        # 2b (rack-aware only). partitions with the fewest members on their racks first (stable);
        # each goes round robin to a member below minQuota on its rack, else to the first
        # member at minQuota on its rack that may still take one more; the rest wait for 2c
        unassigned.sort(key=lambda tp: rack.members_on_racks.get(tp, 0))
        left: list[TopicPartition] = []
        next_index = 0
        for tp in unassigned:
            member = None
            index = rack.next_on_rack(tp, under, next_index)
            if index >= 0:
                member = under[index]
                count = len(assignment[member]) + 1
                if count >= min_q:
                    del under[index]
                    if count < max_q and current_over < expected_over:
                        exact.append(member)
                else:
                    index += 1
                next_index = index % len(under) if under else 0
            elif exact:
                index = rack.next_on_rack(tp, exact, 0)
                if index >= 0:
                    member = exact[index]
                    if len(assignment[member]) + 1 == max_q:
                        del exact[index]
                        current_over += 1
                        if current_over == expected_over:
                            exact.clear()
            if member is None:
                left.append(tp)
                continue
            assignment[member].append(tp)
            previous = revoked.get(tp)
            if (previous is not None and previous != member) or tp in multi:
                transferring[tp] = member
        unassigned = left
    exact_head = 0
    # 2c. round robin over the members below quota, then one each to members at minQuota
    pos = 0
    for tp in unassigned:
        if pos < len(under):
            member = under[pos]
            pos += 1
        elif not under and exact_head >= len(exact):
            raise IllegalStateError(f"sticky: no member left below quota for {tp} "
                                    f"(min={min_q}, max={max_q}, members={n})")
        elif not under:
            member = exact[exact_head]
            exact_head += 1
        else:
            member = under[0]
            pos = 1
        target = assignment[member]
        target.append(tp)
        if revoked or multi:
            previous = revoked.get(tp)
            if (previous is not None and previous != member) or tp in multi:
                transferring[tp] = member
        count = len(target)
        if count == min_q:
            if pos and under[pos - 1] == member:   # the iterator's remove(): only members from `under`
                pos -= 1
                del under[pos]
            exact.append(member)
        elif count == max_q:
            current_over += 1
    if under:
        if current_over != expected_over:
            raise IllegalStateError(f"sticky: {current_over} members above minQuota, expected {expected_over}, "
                                    f"and no partition left for {under}")
        short = [m for m in under if len(assignment[m]) != min_q]
        if short:
            raise IllegalStateError(f"sticky: member {short[0]!r} is below minQuota {min_q} with nothing left")
    return assignment, transferring


def sticky_assign(partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription],
                  partition_racks: Optional[PartitionRacks] = None, *, prefer_rack_aware: bool = False
                  ) -> tuple[Assignment, Optional[dict[TopicPartition, str]]]:
    """The shared sticky algorithm.  Returns (assignment, partitions changing owner -> new owner),
    the second being ``None`` when the general algorithm ran (the caller then computes it)."""
    subscribed = {t for s in subscriptions.values() for t in s.topics}
    ppt = {t: int(n) for t, n in partitions_per_topic.items() if t in subscribed and n and n > 0}
    if not subscriptions:
        return {}, {}
    order = hashmap_order(subscriptions)
    rack = RackInfo.build(ppt, subscriptions, partition_racks, prefer_rack_aware)
    all_equal, owned, multi, max_gen = _previous_owners(ppt.keys(), subscriptions, order)
    if all_equal:
        return _constrained_assign(ppt, owned, multi, rack)
    return _GeneralBuilder(ppt, subscriptions, order, owned, max_gen, rack).build(), None


def _sorted(assignment: Assignment, members, topics) -> Assignment:
    safe = java_order_is_python_order(topics)
    return {m: sort_partitions(assignment.get(m, ()), safe) for m in members}


class StickyAssignor(RackAwareAssignor):
    """Balanced first, sticky second; eager protocol (everything is revoked before a rebalance)."""

    name = "sticky"
    supported_protocols = (EAGER,)

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription],
               partition_racks: Optional[PartitionRacks] = None) -> Assignment:
        assignment, _ = sticky_assign(partitions_per_topic, subscriptions, partition_racks,
                                      prefer_rack_aware=self.prefer_rack_aware_logic)
        return _sorted(assignment, subscriptions, partitions_per_topic)


class CooperativeStickyAssignor(RackAwareAssignor):
    """The sticky assignment minus every partition that changes owner (revoked first, KIP-429).

    Supports both protocols, as Kafka's: ``("cooperative", "eager")``.
    """

    name = "cooperative-sticky"
    supported_protocols = (COOPERATIVE, EAGER)

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription],
               partition_racks: Optional[PartitionRacks] = None) -> Assignment:
        assignment, transferring = sticky_assign(partitions_per_topic, subscriptions, partition_racks,
                                                 prefer_rack_aware=self.prefer_rack_aware_logic)
        if transferring is None:
            transferring = _changing_owner(subscriptions, assignment)
        withheld: dict[str, set[TopicPartition]] = {}
        for tp, member in transferring.items():
            withheld.setdefault(member, set()).add(tp)
        for member, tps in withheld.items():
            assignment[member] = [tp for tp in assignment[member] if tp not in tps]
        return _sorted(assignment, subscriptions, partitions_per_topic)


def _changing_owner(subscriptions: Mapping[str, Subscription], assignment: Assignment) -> dict[TopicPartition, str]:
    """Partitions newly assigned to a member that some member owned and now loses (general path)."""
    added: dict[TopicPartition, str] = {}
    revoked: set[TopicPartition] = set()
    for member, tps in assignment.items():
        owned = {TopicPartition(*tp) for tp in subscriptions[member].owned_partitions}
        now = set(tps)
        for tp in tps:
            if tp not in owned:
                added[tp] = member
        revoked.update(tp for tp in owned if tp not in now)
    return {tp: m for tp, m in added.items() if tp in revoked}
