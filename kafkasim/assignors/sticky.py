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
3. otherwise the *general* algorithm (:class:`_GeneralBuilder`): keep owned partitions
   still subscribed; give each unassigned partition (topics with fewest subscribers
   first) to the least loaded eligible member; then move partitions from members with
   at least two more than an eligible member until balanced (preferring to return a
   partition to its previous owner, and to undo an earlier move rather than make a
   new one); keep the result only if it is more balanced than before the moves.

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
Replica racks are unknown to kafkasim, so (like Kafka without partition racks) the
assignment is not rack-aware.

Thread-safety: stateless (each call builds its own private working state); safe to share.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Mapping, Optional

from sortedcontainers import SortedList

from kafkasim.errors import IllegalStateError
from kafkasim.types import TopicPartition

from kafkasim.assignors._java import JavaHashSet, hashmap_order, topic_partition_hash
from kafkasim.assignors.base import (
    COOPERATIVE, DEFAULT_GENERATION, EAGER, Assignor, Subscription, java_order_is_python_order, java_str_key,
    sort_partitions, topic_partitions,
)

__all__ = ["StickyAssignor", "CooperativeStickyAssignor", "sticky_assign"]

Assignment = dict[str, list[TopicPartition]]


def _tp_hash(tp: TopicPartition) -> int:
    return topic_partition_hash(tp.topic, tp.partition)


def _topics_of(sub: Subscription) -> list[str]:
    return list(dict.fromkeys(sub.topics))


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


def _constrained_assign(ppt: Mapping[str, int], owned: dict[str, list[TopicPartition]],
                        multi: set[TopicPartition]) -> tuple[Assignment, dict[TopicPartition, str]]:
    """Step 2, identical subscriptions.  Returns (assignment, partitions changing owner -> new owner)."""
    total = sum(ppt.values())
    n = len(owned)
    min_q, max_q = total // n, -(-total // n)
    expected_over = total % n
    current_over = 0
    assignment: Assignment = {m: [] for m in owned}
    assigned: set[TopicPartition] = set()
    revoked: set[TopicPartition] = set()
    under: list[str] = []          # unfilled members below minQuota
    exact: list[str] = []          # members at minQuota that may still take one more
    # 2a. keep owned partitions up to quota, in Kafka's HashMap order of members
    safe = java_order_is_python_order(ppt)
    by_partition = itemgetter(1, 0) if safe else (lambda tp: (tp[1], java_str_key(tp[0])))
    for member, mine in owned.items():
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
            revoked.update(kept[max_q:])
        else:
            target.extend(kept[:min_q])
            assigned.update(kept[:min_q])
            revoked.update(kept[min_q:])
            if current_over < expected_over:
                exact.append(member)
    unassigned: list[TopicPartition] = []
    for t in sorted(ppt, key=java_str_key):
        tps = topic_partitions(t, 0, ppt[t])
        unassigned.extend([tp for tp in tps if tp not in assigned] if assigned else tps)
    under.sort(key=java_str_key)
    exact.sort(key=java_str_key)
    exact_head = 0
    transferring: dict[TopicPartition, str] = {}
    # 2b. round robin over the members below quota, then one each to members at minQuota
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
        if tp in revoked or tp in multi:
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


class _Movements:
    """Kafka's PartitionMovements: where each moved partition came from, per topic and pair."""

    def __init__(self) -> None:
        self.by_topic: dict[str, dict[tuple[str, str], JavaHashSet]] = {}
        self.moves: dict[TopicPartition, tuple[str, str]] = {}

    def _remove(self, tp: TopicPartition) -> tuple[str, str]:
        pair = self.moves.pop(tp)
        per_topic = self.by_topic[tp.topic]
        per_topic[pair].discard(tp)
        if not len(per_topic[pair]):
            del per_topic[pair]
        if not per_topic:
            del self.by_topic[tp.topic]
        return pair

    def _add(self, tp: TopicPartition, pair: tuple[str, str]) -> None:
        self.moves[tp] = pair
        self.by_topic.setdefault(tp.topic, {}).setdefault(pair, JavaHashSet(_tp_hash)).add(tp)

    def move(self, tp: TopicPartition, old: str, new: str) -> None:
        if tp in self.moves:
            src, _dst = self._remove(tp)
            if src != new:
                self._add(tp, (src, new))
        else:
            self._add(tp, (old, new))

    def actual_partition_to_move(self, tp: TopicPartition, old: str, new: str) -> TopicPartition:
        per_topic = self.by_topic.get(tp.topic)
        if per_topic is None:
            return tp
        if tp in self.moves:
            old = self.moves[tp][0]
        reverse = per_topic.get((new, old))
        if reverse is None:
            return tp
        return reverse.first()


class _GeneralBuilder:
    """Step 3, unequal subscriptions: Kafka's general algorithm, one instance per call."""

    def __init__(self, ppt: Mapping[str, int], subscriptions: Mapping[str, Subscription], order: list[str],
                 current: dict[str, list[TopicPartition]], max_gen: int) -> None:
        self.ppt = ppt
        self.subscriptions = subscriptions
        self.order = order
        self.max_gen = max_gen
        self.topic_consumers: dict[str, list[str]] = {t: [] for t in ppt}
        self.consumer_topics: dict[str, list[str]] = {}
        self.consumer_topic_set: dict[str, frozenset] = {}
        for member in order:
            topics = [t for t in _topics_of(subscriptions[member]) if t in ppt]
            self.consumer_topics[member] = topics
            self.consumer_topic_set[member] = frozenset(topics)
            for t in topics:
                self.topic_consumers[t].append(member)
            current.setdefault(member, [])
        self.current = current
        self.owner: dict[TopicPartition, str] = {tp: m for m, tps in current.items() for tp in tps}
        topics_sorted = sorted(self.topic_consumers, key=lambda t: (len(self.topic_consumers[t]), java_str_key(t)))
        self.sorted_all = [tp for t in topics_sorted for tp in topic_partitions(t, 0, ppt[t])]
        self.jkey = {m: java_str_key(m) for m in order}
        self.subs = SortedList()
        self.revocation_required = False
        self.movements = _Movements()
        self.max_size = {m: sum(ppt[t] for t in ts) for m, ts in self.consumer_topics.items()}
        self.topic_owner_counts: dict[str, dict[str, int]] = {}

    # -- the sorted set of members by (assignment size, member id) --------------------
    def _entry(self, m: str) -> tuple:
        return (len(self.current[m]), self.jkey[m], m)

    def _sub_add(self, m: str) -> None:
        self.subs.add(self._entry(m))

    def _sub_discard(self, m: str) -> None:
        e = self._entry(m)
        if e in self.subs:
            self.subs.remove(e)

    def _count(self, tp: TopicPartition, m: str, delta: int) -> None:
        per = self.topic_owner_counts.setdefault(tp.topic, {})
        c = per.get(m, 0) + delta
        if c:
            per[m] = c
        else:
            per.pop(m, None)

    def _recount(self) -> None:
        self.topic_owner_counts = {}
        for m, tps in self.current.items():
            for tp in tps:
                self._count(tp, m, 1)

    def build(self) -> Assignment:
        prev = self._previous_generation_owners()
        assigned: set[TopicPartition] = set()
        for member, tps in self.current.items():
            topics = self.consumer_topic_set[member]
            keep = []
            for tp in tps:
                if tp.topic not in self.ppt:
                    self.owner.pop(tp, None)
                elif tp.topic not in topics:
                    self.revocation_required = True   # Kafka leaves the stale owner entry; so do we
                else:
                    keep.append(tp)
                    assigned.add(tp)
            tps[:] = keep
        unassigned = [tp for tp in self.sorted_all if tp not in assigned]
        for m in self.current:
            self._sub_add(m)
        self._balance(prev, unassigned)
        return self.current

    def _previous_generation_owners(self) -> dict[TopicPartition, tuple[str, int]]:
        """Owners from generations below the highest: Kafka's prevAssignment."""
        prev: dict[TopicPartition, tuple[str, int]] = {}
        for member in self.order:
            sub = self.subscriptions[member]
            gen = sub.generation_id
            if gen < self.max_gen:
                for tp in sub.owned_partitions:
                    tp = tp if type(tp) is TopicPartition else TopicPartition(*tp)
                    if tp not in prev or gen > prev[tp][1]:
                        prev[tp] = (member, gen)
        return prev

    def _first_eligible(self, topic: str) -> Optional[str]:
        for _, _, m in self.subs:
            if topic in self.consumer_topic_set[m]:
                return m
        return None

    def _balance(self, prev, unassigned: list[TopicPartition]) -> None:
        current = self.current
        initializing = not current[self.subs[-1][2]] if self.subs else True
        for tp in unassigned:
            if not self.topic_consumers[tp.topic]:
                continue
            m = self._first_eligible(tp.topic)
            if m is not None:
                self._sub_discard(m)
                current[m].append(tp)
                self.owner[tp] = m
                self._sub_add(m)
        fixed_topics = {t for t, cs in self.topic_consumers.items() if len(cs) < 2}
        self.sorted_all = [tp for tp in self.sorted_all if tp.topic not in fixed_topics]
        unassigned = [tp for tp in unassigned if tp.topic not in fixed_topics]
        fixed: dict[str, list[TopicPartition]] = {}
        for m in self.order:
            if not self._can_participate(m):
                self._sub_discard(m)
                fixed[m] = current.pop(m)
        self._recount()
        pre = {m: list(tps) for m, tps in current.items()}
        pre_owner = dict(self.owner)
        if not self.revocation_required:
            self._perform(unassigned, prev)
        performed = self._perform(self.sorted_all, prev)
        if not initializing and performed and _balance_score(current) >= _balance_score(pre):
            self.subs = SortedList()
            current.clear()
            current.update(pre)
            self.owner = pre_owner
            for m in current:
                self._sub_add(m)
        for m, tps in fixed.items():
            current[m] = tps
            self._sub_add(m)

    def _can_participate(self, m: str) -> bool:
        tps = self.current[m]
        if len(tps) < self.max_size[m]:
            return True
        return any(len(self.topic_consumers[tp.topic]) >= 2 for tp in tps)

    def _is_balanced(self) -> bool:
        if not self.subs:
            return True
        lo, hi = self.subs[0][0], self.subs[-1][0]
        if lo >= hi - 1:
            return True
        size = {m: len(tps) for m, tps in self.current.items()}
        for count, _, m in self.subs:
            if count + 1 >= hi:
                break
            if count == self.max_size[m]:
                continue
            for t in self.consumer_topics[m]:
                for o in self.topic_owner_counts.get(t, ()):
                    if o != m and count + 1 < size[o]:
                        return False
        return True

    def _perform(self, partitions: list[TopicPartition], prev) -> bool:
        performed = False
        while True:
            modified = False
            for tp in partitions:
                if self._is_balanced():
                    break
                consumer = self.owner.get(tp)
                if consumer is None or consumer not in self.current:
                    raise IllegalStateError(f"sticky: partition {tp} has no current owner during rebalance")
                size = len(self.current[consumer])
                p = prev.get(tp)
                # Kafka does not check that the previous owner still subscribes to the topic and
                # can then hand it a partition it cannot consume; kafkasim requires it (docs).
                if (p is not None and p[0] in self.current and tp.topic in self.consumer_topic_set[p[0]]
                        and size > len(self.current[p[0]]) + 1):
                    self._reassign(tp, p[0])
                    performed = modified = True
                    continue
                for other in self.topic_consumers[tp.topic]:
                    if other in self.current and size > len(self.current[other]) + 1:
                        new = self._first_eligible(tp.topic)
                        self._reassign(tp, new)
                        performed = modified = True
                        break
            if not modified:
                return performed

    def _reassign(self, tp: TopicPartition, new: str) -> None:
        old = self.owner[tp]
        to_move = self.movements.actual_partition_to_move(tp, old, new)
        old = self.owner[to_move]
        self._sub_discard(old)
        self._sub_discard(new)
        self.movements.move(to_move, old, new)
        self.current[old].remove(to_move)
        self.current[new].append(to_move)
        self._count(to_move, old, -1)
        self._count(to_move, new, 1)
        self.owner[to_move] = new
        self._sub_add(new)
        self._sub_add(old)


def _balance_score(assignment: Mapping[str, list]) -> int:
    """Sum over member pairs of |size difference| (Kafka's getBalanceScore), in O(M log M)."""
    sizes = sorted(len(v) for v in assignment.values())
    n = len(sizes)
    return sum(s * (2 * i - (n - 1)) for i, s in enumerate(sizes))


def sticky_assign(partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
                  ) -> tuple[Assignment, Optional[dict[TopicPartition, str]]]:
    """The shared sticky algorithm.  Returns (assignment, partitions changing owner -> new owner),
    the second being ``None`` when the general algorithm ran (the caller then computes it)."""
    subscribed = {t for s in subscriptions.values() for t in s.topics}
    ppt = {t: int(n) for t, n in partitions_per_topic.items() if t in subscribed and n and n > 0}
    if not subscriptions:
        return {}, {}
    order = hashmap_order(subscriptions)
    all_equal, owned, multi, max_gen = _previous_owners(ppt.keys(), subscriptions, order)
    if all_equal:
        return _constrained_assign(ppt, owned, multi)
    return _GeneralBuilder(ppt, subscriptions, order, owned, max_gen).build(), None


def _sorted(assignment: Assignment, members, topics) -> Assignment:
    safe = java_order_is_python_order(topics)
    return {m: sort_partitions(assignment.get(m, ()), safe) for m in members}


class StickyAssignor(Assignor):
    """Balanced first, sticky second; eager protocol (everything is revoked before a rebalance)."""

    name = "sticky"
    supported_protocols = (EAGER,)

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> Assignment:
        assignment, _ = sticky_assign(partitions_per_topic, subscriptions)
        return _sorted(assignment, subscriptions, partitions_per_topic)


class CooperativeStickyAssignor(Assignor):
    """The sticky assignment minus every partition that changes owner (revoked first, KIP-429).

    Supports both protocols, as Kafka's: ``("cooperative", "eager")``.
    """

    name = "cooperative-sticky"
    supported_protocols = (COOPERATIVE, EAGER)

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> Assignment:
        assignment, transferring = sticky_assign(partitions_per_topic, subscriptions)
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
