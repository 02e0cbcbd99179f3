"""Step 3 of the sticky assignors: Kafka's *general* algorithm, for unequal subscriptions.

:mod:`kafkasim.assignors.sticky` runs it when the members do not all subscribe to the
same topics (identical subscriptions take the constrained algorithm there). One
:class:`_GeneralBuilder` per call follows Kafka's ``AbstractStickyAssignor.generalAssign``:

1. keep each member's owned partitions that it still subscribes to (a partition of a
   topic it dropped, or, rack-aware, one with no replica on the member's rack, marks
   that a revocation is required);
2. give each unassigned partition, topics with the fewest subscribers first, to the
   least loaded eligible member (members ordered by (assignment size, Java string order
   of the member id), a ``SortedList``); rack-aware, a first pass gives each one to the
   least loaded eligible member on one of its racks, and only the rest go by load alone;
3. set aside members that cannot take part in balancing (every partition they could own
   they own, and none of their topics has a second subscriber);
4. move partitions from a member with at least two more than an eligible member: first
   back to the partition's owner in an older generation if it is eligible, else to the
   least loaded eligible member; :class:`_Movements` (Kafka's ``PartitionMovements``)
   turns a move that reverses an earlier one into undoing it, which keeps stickiness
   (Kafka's rack-aware variant of this step looks for an on-rack member first but then
   moves the partition to the same least loaded eligible member, so racks change nothing here);
5. keep the moves only if the result is more balanced (:func:`_balance_score`, Kafka's
   ``getBalanceScore``) than before them, unless this is the initial assignment.

Worked example: t0 (3 partitions) subscribed by C0 only, t1 (3 partitions) by C0 and C1,
nothing owned → step 2 deals t0 first (fewest subscribers): C0 gets t0p0..t0p2, then t1p0,
t1p1, t1p2 go to the least loaded eligible member each time: C1, C1, C1 →
``C0: [t0p0, t0p1, t0p2]  C1: [t1p0, t1p1, t1p2]`` (balanced; nothing to move).

Impossible states (a partition without a current owner while balancing) raise
:class:`~kafkasim.errors.IllegalStateError` naming the partition.

Thread-safety: a builder is private to one ``assign`` call; nothing is shared.
"""

from __future__ import annotations

from typing import Mapping, Optional

from sortedcontainers import SortedList

from kafkasim.errors import IllegalStateError
from kafkasim.types import TopicPartition

from kafkasim.assignors._java import JavaHashSet, topic_partition_hash
from kafkasim.assignors.base import Subscription, java_str_key, topic_partitions

__all__: list[str] = []   # private to kafkasim.assignors.sticky

Assignment = dict[str, list[TopicPartition]]


def _tp_hash(tp: TopicPartition) -> int:
    return topic_partition_hash(tp.topic, tp.partition)


def _topics_of(sub: Subscription) -> list[str]:
    return list(dict.fromkeys(sub.topics))


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
                 current: dict[str, list[TopicPartition]], max_gen: int, rack=None) -> None:
        self.ppt = ppt
        self.rack = rack            # a sticky.RackInfo when rack-aware, else None
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
                elif tp.topic not in topics or (self.rack is not None and self.rack.mismatch(member, tp)):
                    # unsubscribed, or (rack-aware) off the member's rack: not kept
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

    def _first_on_rack(self, tp: TopicPartition) -> Optional[str]:
        rack = self.rack
        for _, _, m in self.subs:
            if tp.topic in self.consumer_topic_set[m] and not rack.mismatch(m, tp):
                return m
        return None

    def _balance(self, prev, unassigned: list[TopicPartition]) -> None:
        current = self.current
        initializing = not current[self.subs[-1][2]] if self.subs else True
        to_assign = unassigned
        if self.rack is not None:
            # rack-aware: first give each partition to the least loaded eligible member on its rack
            to_assign = []
            for tp in unassigned:
                m = self._first_on_rack(tp) if self.topic_consumers[tp.topic] else None
                if m is None:
                    to_assign.append(tp)
                    continue
                self._sub_discard(m)
                current[m].append(tp)
                self.owner[tp] = m
                self._sub_add(m)
        for tp in to_assign:
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

