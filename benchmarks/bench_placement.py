"""Placement and reassignment planning at scale (kafkasim.placement).

Figures (best of 3):

- ``reassign_plan_1k_s``: ``plan_reassignment`` for 1,000 partitions of RF 3 on 10
  brokers when an 11th is added (seconds, lower is better). Baseline: Kafka's
  ``--generate`` way, ``assign_replicas_to_brokers`` over the 11 brokers, same run.
- ``reassign_replicas_moved_1k``: replicas the plan moves in that case (lower is
  better). Baseline: the replicas ``--generate``'s proposal would move.
- ``striped_place_10k_s``: ``striped_place`` of 10,000 partitions of RF 3 on 12 brokers
  in 3 racks (seconds, lower is better). Baseline: ``assign_replicas_to_brokers``, same input.

``python -m benchmarks placement`` runs just this file.
"""

from __future__ import annotations

from benchmarks.common import best_of, figure
from kafkasim.placement.admin_utils import BrokerMetadata, assign_replicas_to_brokers
from kafkasim.placement.java_random import JavaRandom
from kafkasim.placement.reassign import plan_reassignment, replica_moves
from kafkasim.placement.striped import UsableBroker, striped_place
from kafkasim.types import TopicPartition

__all__ = ["run"]


def run() -> dict:
    old = [BrokerMetadata(b) for b in range(10)]
    new = old + [BrokerMetadata(10)]
    current = {TopicPartition("t", p): r for p, r in assign_replicas_to_brokers(old, 1000, 3, 0).items()}
    brokers = {b.id: None for b in new}

    def generate():
        return {TopicPartition("t", p): r for p, r in assign_replicas_to_brokers(new, 1000, 3, 0).items()}

    plan_s = best_of(lambda: plan_reassignment(current, brokers))
    generate_s = best_of(generate)
    moved = replica_moves(current, plan_reassignment(current, brokers))
    generated_moved = replica_moves(current, generate())
    racked = [(b, f"rack{b % 3}") for b in range(12)]
    striped_s = best_of(lambda: striped_place([UsableBroker(b, r) for b, r in racked], 10_000, 3,
                                              rng=JavaRandom(0)))
    admin_s = best_of(lambda: assign_replicas_to_brokers([BrokerMetadata(b, r) for b, r in racked], 10_000, 3, 0))
    return {
        "reassign_plan_1k_s": figure(plan_s, "s", generate_s, "assign_replicas_to_brokers (--generate), same input",
                                     target="< 5 s", higher_is_better=False),
        "reassign_replicas_moved_1k": figure(moved, "replicas", generated_moved,
                                             "replicas --generate's proposal moves", higher_is_better=False),
        "striped_place_10k_s": figure(striped_s, "s", admin_s, "assign_replicas_to_brokers, same input",
                                      higher_is_better=False),
    }
