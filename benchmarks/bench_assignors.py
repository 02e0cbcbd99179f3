"""Assignor scale: sticky and cooperative-sticky on 100,000 partitions x 1,000 members and
10,000 x 100, fresh and after one member leaves (re-run with previous ownership).

Figures (seconds, lower is better; each the worse of sticky / cooperative-sticky, best of 3):

- ``sticky_assign_100k_1k_s`` / ``sticky_assign_10k_100_s``: a fresh assignment;
- ``sticky_rebalance_100k_1k_s`` / ``sticky_rebalance_10k_100_s``: one member leaves, the
  survivors report what they owned (generation 1) and the assignor re-runs.

Baseline: the range assignor on the same input in the same run.  Every member subscribes
to every topic (Kafka's constrained path; 100 topics of 1,000 / 100 partitions).

``python -m benchmarks assignors`` runs just this file.
"""

from __future__ import annotations

from benchmarks.common import best_of, figure
from kafkasim.assignors import CooperativeStickyAssignor, RangeAssignor, StickyAssignor, Subscription

__all__ = ["run"]


def _group(topics: int, partitions_per_topic: int, members: int):
    ppt = {f"topic-{t:03d}": partitions_per_topic for t in range(topics)}
    names = list(ppt)
    subs = {f"consumer-{m:04d}": Subscription(names) for m in range(members)}
    return ppt, subs


def _rebalance_input(ppt, subs):
    first = StickyAssignor().assign(ppt, subs)
    leaver = sorted(subs)[len(subs) // 2]
    return {m: s._replace(owned_partitions=first[m], generation_id=1) for m, s in subs.items() if m != leaver}


def _case(label: str, topics: int, per_topic: int, members: int, target_s: float, repeat: int) -> dict:
    ppt, subs = _group(topics, per_topic, members)
    after = _rebalance_input(ppt, subs)
    base_fresh = best_of(lambda: RangeAssignor().assign(ppt, subs), repeat)
    base_after = best_of(lambda: RangeAssignor().assign(ppt, after), repeat)
    fresh = max(best_of(lambda: a.assign(ppt, subs), repeat) for a in (StickyAssignor(), CooperativeStickyAssignor()))
    again = max(best_of(lambda: a.assign(ppt, after), repeat) for a in (StickyAssignor(), CooperativeStickyAssignor()))
    return {
        f"sticky_assign_{label}_s": figure(fresh, "s", base_fresh, "range assignor, same input",
                                           target=f"< {target_s} s", higher_is_better=False),
        f"sticky_rebalance_{label}_s": figure(again, "s", base_after, "range assignor, same input",
                                              target=f"< {target_s} s", higher_is_better=False),
    }


def run() -> dict:
    out = {}
    out.update(_case("10k_100", 100, 100, 100, 0.2, repeat=5))
    out.update(_case("100k_1k", 100, 1000, 1000, 2.0, repeat=3))
    return out
