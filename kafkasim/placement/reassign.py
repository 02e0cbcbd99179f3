"""The reassignment planner: a balanced target with the fewest possible replica moves.

``plan_reassignment(current, brokers)`` takes every partition's current replica list
(leader first) and the brokers that will remain (id → rack or ``None``; new brokers may
hold nothing yet, removed brokers are simply absent) and returns a target in which

* each broker holds ``floor(R/B)`` or ``ceil(R/B)`` replicas (``R`` replicas, ``B`` brokers),
* each broker leads ``floor(P/B)`` or ``ceil(P/B)`` partitions (leader = first replica),
* every partition keeps its replication factor, on distinct brokers,
* with racks, every partition spans ``min(RF, racks)`` racks,
* and, subject to all of that, the number of **replica moves** (replicas placed on a
  broker that did not hold them) is the minimum possible. Leadership is balanced only by
  reordering replica lists, which moves no data; among those orders the current leader
  is kept where possible, then an already-present replica is preferred as new leader.

Algorithm (numbered):

1. Validate: distinct replicas per partition, RF ≤ live brokers, racks on all brokers
   or none (Kafka's "Not all brokers have rack information ...").
2. Replicas as a min-cost flow: source → partition (RF units) → [partition × rack, at
   most one unit per rack when RF ≤ racks, else one *mandatory* unit per rack fed
   straight from the source] → broker (one unit; cost 0 if the broker holds it now,
   else 1) → sink, each broker's ``k``-th unit charged ``-M`` up to ``floor``, 0 up to
   ``ceil``, ``+M`` beyond (``M`` above any move count), so balance comes first and
   moves second. Warm start: each broker keeps up to ``floor`` of its current replicas
   (leaders first), a min-cost flow of its value; successive shortest paths route the
   rest, so the result is optimal.
2b. When uneven racks make balance impossible, the total distance to ``[floor, ceil]``
   can be reached in many ways (even by leaving a broker idle), so the charges then
   gain a squared term and every negative cycle through the sink is cancelled: the
   result minimises, in this order, the distance to the range, the squared distance
   (the excess spread evenly), and the moves.
3. Leaders as a second flow over the chosen replica sets: cost 0 for the current
   leader, 1 for another kept replica, 2 for a newly added one; per-broker penalty as in 2.
4. Order: the leader, then the kept replicas in their current order, then new ones.

``lower_bound_moves`` is the counting bound (see its docstring); it equals the optimum
when brokers are only added and there are no racks (the docs give the proof and a
counterexample with a removed broker). Pure; thread-safe (no shared state).

Worked example (the issue's seed): three brokers, nine partitions of RF 3 (27 replicas,
9 per broker), add broker 3 → three brokers keep 7 and broker 3 receives 6: 6 moves
(the bound), and each broker leads 2 or 3 partitions (the new one through 2 reorders).
"""

from __future__ import annotations

from collections import Counter
from typing import Mapping, Optional, Sequence

from kafkasim.errors import (
    IllegalStateError, InvalidReplicaAssignmentError, InvalidReplicationFactorError,
    UnknownTopicOrPartitionError,
)
from kafkasim.placement.mincostflow import MinCostFlow
from kafkasim.types import TopicPartition

__all__ = ["plan_reassignment", "lower_bound_moves", "replica_moves", "leader_changes", "balance_bounds"]


def balance_bounds(total: int, n_brokers: int) -> tuple[int, int]:
    """``(floor, ceil)`` of ``total / n_brokers``: the range "within one of the average"."""
    lo = total // n_brokers
    return lo, lo + (total % n_brokers > 0)


def _balance_charge(lo: int, hi: int, unit: int, spread: int = 0):
    """The cost of a broker's ``k+1``-th unit: ``unit`` per unit of distance to ``[lo, hi]``
    (``-unit`` up to ``lo``, 0 up to ``hi``, then ``+unit``), plus, when ``spread`` is
    given, ``spread`` per unit of *squared* distance (the marginal ``2d ± 1``).

    The flat part alone makes keeping up to ``lo`` current replicas per broker a
    min-cost warm start; the squared part (applied afterwards by
    :meth:`MinCostFlow.recharge`) spreads an excess that racks make unavoidable evenly.
    """
    def charge(k: int) -> int:
        if k < lo:
            return -unit - spread * (2 * (lo - k) - 1)
        if k < hi:
            return 0
        return unit + spread * (2 * (k - hi) + 1)
    return charge


def _validate(current: Mapping[TopicPartition, Sequence[int]],
              brokers: Mapping[int, Optional[str]]) -> Optional[dict[int, str]]:
    if current and not brokers:
        raise InvalidReplicaAssignmentError("no brokers to place the replicas on")
    for tp, replicas in current.items():
        if not replicas:
            raise InvalidReplicaAssignmentError(f"partition {tp}: the replica list is empty")
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignmentError(f"partition {tp}: duplicate replicas in {list(replicas)}")
        if len(replicas) > len(brokers):
            raise InvalidReplicationFactorError(
                f"partition {tp}: replication factor: {len(replicas)} larger than available brokers: {len(brokers)}")
    racked = [b for b, rack in brokers.items() if rack is not None]
    if racked and len(racked) != len(brokers):
        raise InvalidReplicaAssignmentError(
            "Not all brokers have rack information for replica rack aware assignment.")
    return dict(brokers) if racked else None


def _choose_replicas(tps, current, live, racks) -> dict[TopicPartition, set[int]]:
    """Step 2 of the module docstring."""
    total = sum(len(current[tp]) for tp in tps)
    lo, hi = balance_bounds(total, len(live))
    rack_names = sorted(set(racks.values())) if racks else [None]
    brokers_of = {r: [b for b in live if (racks[b] if racks else None) == r] for r in rack_names}
    n_racks = len(rack_names)
    node = iter(range(10**9))
    s = next(node)
    broker_node = {b: next(node) for b in live}
    g = MinCostFlow(1 + len(live) + len(tps) * (1 + n_racks))
    spread = total + 1                     # above any move count
    big = spread * (2 * total * total + 1)  # above any move count plus squared spread
    for b in live:
        g.set_drain(broker_node[b], _balance_charge(lo, hi, big))
    arcs = {}  # tp -> {"src": arc, "rack": {r: (feed arc, mandatory arc)}, "broker": {b: arc}}
    for tp in tps:
        rf = len(current[tp])
        pnode = next(node)
        now = set(current[tp])
        mandatory = racks is not None and rf > n_racks
        src = g.add_edge(s, pnode, rf - n_racks if mandatory else rf, 0)
        rack_arcs, broker_arcs = {}, {}
        for r in rack_names:
            if racks is None:
                rnode = pnode
                feed = mand = None
            else:
                rnode = next(node)
                feed = g.add_edge(pnode, rnode, rf - n_racks if mandatory else 1, 0)
                mand = g.add_edge(s, rnode, 1, 0) if mandatory else None
            rack_arcs[r] = (feed, mand)
            for b in brokers_of[r]:
                broker_arcs[b] = g.add_edge(rnode, broker_node[b], 1, 0 if b in now else 1)
        arcs[tp] = {"src": src, "rack": rack_arcs, "broker": broker_arcs}
    # warm start: every broker keeps up to `lo` of its replicas, leaders first
    kept = Counter()
    routed = 0
    order = [(0, tp) for tp in tps] + [(i, tp) for tp in tps for i in range(1, len(current[tp]))]
    for i, tp in order:
        b = current[tp][i]
        if b not in broker_node or kept[b] >= lo:
            continue
        a = arcs[tp]
        feed, mand = a["rack"][racks[b] if racks else None]
        if mand is not None and g.cap[mand] > 0:
            path = [mand]
        elif g.cap[a["src"]] > 0 and (feed is None or g.cap[feed] > 0):
            path = [a["src"]] + ([feed] if feed is not None else [])
        else:
            continue
        for e in path + [a["broker"][b]]:
            g.push(e)
        g.drain(broker_node[b])
        kept[b] += 1
        routed += 1
    if g.augment(s, total - routed) != total - routed:
        raise IllegalStateError("reassignment flow could not place every replica")  # pragma: no cover
    g.recharge({broker_node[b]: _balance_charge(lo, hi, big, spread) for b in live})
    return {tp: {b for b, e in arcs[tp]["broker"].items() if g.flow(e)} for tp in tps}


def _choose_leaders(tps, current, chosen, live) -> dict[TopicPartition, int]:
    """Step 3 of the module docstring."""
    lo, hi = balance_bounds(len(tps), len(live))
    index = {b: 1 + i for i, b in enumerate(live)}
    g = MinCostFlow(1 + len(live) + len(tps))
    spread = 2 * len(tps) + 1
    big = spread * (2 * len(tps) ** 2 + 1)
    for b in live:
        g.set_drain(index[b], _balance_charge(lo, hi, big))
    arcs, counts, routed = {}, Counter(), 0
    for i, tp in enumerate(tps):
        p = 1 + len(live) + i
        src = g.add_edge(0, p, 1, 0)
        now = current[tp]
        arcs[tp] = {b: g.add_edge(p, index[b], 1, 0 if b == now[0] else 1 if b in now else 2)
                    for b in sorted(chosen[tp])}
        leader = now[0]
        if leader in arcs[tp] and counts[leader] < lo:
            for e in (src, arcs[tp][leader]):
                g.push(e)
            g.drain(index[leader])
            counts[leader] += 1
            routed += 1
    g.augment(0, len(tps) - routed)
    g.recharge({index[b]: _balance_charge(lo, hi, big, spread) for b in live})
    return {tp: next(b for b, e in arcs[tp].items() if g.flow(e)) for tp in tps}


def plan_reassignment(current: Mapping[TopicPartition, Sequence[int]],
                      brokers: Mapping[int, Optional[str]]) -> dict[TopicPartition, list[int]]:
    """The balanced, fewest-moves target for ``current`` on ``brokers`` (see the module docstring).

    Returns every partition of ``current`` (unchanged ones included), leader first.
    """
    racks = _validate(current, brokers)
    if not current:
        return {}
    tps = sorted(current)
    live = sorted(brokers)
    chosen = _choose_replicas(tps, current, live, racks)
    leaders = _choose_leaders(tps, current, chosen, live)
    target = {}
    for tp in tps:
        replicas = chosen[tp]
        leader = leaders[tp]
        kept = [b for b in current[tp] if b in replicas and b != leader]
        new = sorted(b for b in replicas if b not in current[tp] and b != leader)
        target[tp] = [leader] + kept + new
    return target


def lower_bound_moves(current: Mapping[TopicPartition, Sequence[int]],
                      brokers: Mapping[int, Optional[str]]) -> int:
    """A lower bound on the replica moves of any balanced, rack-spread target.

    Broker count bound: with ``R`` replicas on ``B`` brokers, ``k = R mod B`` brokers end
    with ``ceil`` and the rest with ``floor``. A broker can keep at most its target of
    the replicas it holds, so at most ``Σ min(have_b, floor) + min(k, #{b: have_b ≥ ceil})``
    replicas stay; every other replica (including all on removed brokers) must move.
    Rack bound: a partition can keep at most one replica per rack when RF ≤ racks, and
    must add one replica per rack it misses otherwise. The bound is the larger of the two.
    It bounds *balanced* targets: when uneven racks rule balance out (a rack too small
    for its share), the planner's most balanced target may move fewer replicas.
    """
    racks = _validate(current, brokers)
    if not current:
        return 0
    total = sum(len(r) for r in current.values())
    lo, hi = balance_bounds(total, len(brokers))
    have = Counter(b for r in current.values() for b in r if b in brokers)
    keep = sum(min(have[b], lo) for b in brokers)
    if hi > lo:
        keep += min(total - lo * len(brokers), sum(1 for b in brokers if have[b] >= hi))
    by_brokers = total - keep
    if racks is None:
        return by_brokers
    n_racks = len(set(racks.values()))
    by_racks = 0
    for replicas in current.values():
        live = [b for b in replicas if b in brokers]
        spanned = len({racks[b] for b in live})
        if len(replicas) <= n_racks:
            keepable = spanned
        else:
            keepable = min(len(live), len(replicas) - (n_racks - spanned))
        by_racks += len(replicas) - keepable
    return max(by_brokers, by_racks)


def replica_moves(current: Mapping[TopicPartition, Sequence[int]],
                  target: Mapping[TopicPartition, Sequence[int]]) -> int:
    """Replicas in ``target`` on a broker that does not hold them in ``current`` (data to copy)."""
    moves = 0
    for tp, replicas in target.items():
        if tp not in current:
            raise UnknownTopicOrPartitionError(f"partition {tp} of the target is not in the current assignment")
        moves += len(set(replicas) - set(current[tp]))
    return moves


def leader_changes(current: Mapping[TopicPartition, Sequence[int]],
                   target: Mapping[TopicPartition, Sequence[int]]) -> int:
    """Partitions of ``target`` whose first replica (preferred leader) differs from ``current``."""
    for tp in target:
        if tp not in current:
            raise UnknownTopicOrPartitionError(f"partition {tp} of the target is not in the current assignment")
    return sum(1 for tp, r in target.items() if list(r[:1]) != list(current[tp][:1]))
