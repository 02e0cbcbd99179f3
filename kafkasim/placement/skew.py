"""Per-broker skew: replicas, leaders and bytes per broker, and their max/min ratios.

``broker_skew(assignment, brokers=None, leaders=None, partition_bytes=None)`` counts, for
every broker, the replicas it holds, the partitions it leads (the given ``leaders``,
else each partition's first replica, Kafka's preferred leader; a ``None`` leader is an
offline partition and counts nowhere) and the bytes it stores (a replica stores the
whole partition, so a partition's bytes count on each of its replicas).

Ratios are ``max / min`` over the brokers. A broker with 0 of something while another
has some makes the ratio ``inf`` — the idle-broker case (a broker added without a
reassignment); all zero gives 1.0. A ratio above :data:`SKEW_THRESHOLD` (1.3, the
Kafka operators' rule of thumb for when to reassign) is flagged.

Worked example: the issue's seed cluster (3 brokers, 9 partitions, RF 3) plus an idle
broker 3 → replicas ``{0: 9, 1: 9, 2: 9, 3: 0}``, ratio ``inf``, broker 3 idle, flagged.

Pure (used by ``describe``, the metrics and the Spark skew audit); thread-safe.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Optional, Sequence

from kafkasim.errors import InvalidArgumentError
from kafkasim.types import TopicPartition

__all__ = ["SKEW_THRESHOLD", "BrokerLoad", "SkewReport", "broker_skew", "max_min_ratio"]

SKEW_THRESHOLD = 1.3
"""Flag a max/min ratio above this (operators reassign past 1.3 partitions per broker)."""


def max_min_ratio(values: Iterable[float]) -> float:
    """``max / min``; ``inf`` when the least is 0 and the most is not; 1.0 for all-zero or empty."""
    values = list(values)
    if not values or max(values) == 0:
        return 1.0
    low = min(values)
    return math.inf if low == 0 else max(values) / low


@dataclass(frozen=True)
class BrokerLoad:
    """One broker's share: replicas held, partitions led, bytes stored."""

    broker: int
    replicas: int
    leaders: int
    bytes: int


@dataclass(frozen=True)
class SkewReport:
    """Per-broker loads (by broker id) and the max/min ratio of each measure."""

    brokers: tuple[BrokerLoad, ...]
    replicas_ratio: float
    leaders_ratio: float
    bytes_ratio: Optional[float]  # None when no byte sizes were given
    threshold: float = SKEW_THRESHOLD
    idle: tuple[int, ...] = field(default=())

    @property
    def flagged(self) -> dict[str, bool]:
        """Which measures are skewed past the threshold."""
        out = {"replicas": self.replicas_ratio > self.threshold, "leaders": self.leaders_ratio > self.threshold}
        if self.bytes_ratio is not None:
            out["bytes"] = self.bytes_ratio > self.threshold
        return out

    @property
    def skewed(self) -> bool:
        """True when any measure is flagged."""
        return any(self.flagged.values())

    def as_dict(self) -> dict:
        """JSON-ready: an infinite ratio is written ``"inf"``."""
        def ratio(r):
            return None if r is None else ("inf" if math.isinf(r) else round(r, 4))
        return {"brokers": [dict(vars(b)) for b in self.brokers],
                "ratios": {"replicas": ratio(self.replicas_ratio), "leaders": ratio(self.leaders_ratio),
                           "bytes": ratio(self.bytes_ratio)},
                "threshold": self.threshold, "flagged": self.flagged, "idle": list(self.idle)}


def broker_skew(assignment: Mapping[TopicPartition, Sequence[int]], brokers: Optional[Iterable[int]] = None,
                leaders: Optional[Mapping[TopicPartition, Optional[int]]] = None,
                partition_bytes: Optional[Mapping[TopicPartition, int]] = None,
                threshold: float = SKEW_THRESHOLD) -> SkewReport:
    """The skew report of ``assignment`` over ``brokers`` (default: the brokers it names).

    Pass every broker of the cluster in ``brokers`` so idle ones count; a replica on a
    broker missing from ``brokers`` is an error naming it.
    """
    ids = sorted(set(brokers) if brokers is not None else {b for r in assignment.values() for b in r})
    replicas = {b: 0 for b in ids}
    led = {b: 0 for b in ids}
    stored = {b: 0 for b in ids}
    for tp, rs in assignment.items():
        size = 0
        if partition_bytes is not None:
            size = partition_bytes.get(tp, 0)
            if size < 0:
                raise InvalidArgumentError(f"partition {tp}: bytes must be >= 0, got {size}")
        for b in rs:
            if b not in replicas:
                raise InvalidArgumentError(f"partition {tp}: replica on broker {b}, which is not in brokers {ids}")
            replicas[b] += 1
            stored[b] += size
        leader = leaders.get(tp, rs[0] if rs else None) if leaders is not None else (rs[0] if rs else None)
        if leader is not None:
            if leader not in led:
                raise InvalidArgumentError(f"partition {tp}: leader {leader} is not in brokers {ids}")
            led[leader] += 1
    loads = tuple(BrokerLoad(b, replicas[b], led[b], stored[b]) for b in ids)
    return SkewReport(loads, max_min_ratio(replicas.values()), max_min_ratio(led.values()),
                      max_min_ratio(stored.values()) if partition_bytes is not None else None,
                      threshold, tuple(b for b in ids if replicas[b] == 0))
