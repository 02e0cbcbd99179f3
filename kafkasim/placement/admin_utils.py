"""Kafka's ``AdminUtils.assignReplicasToBrokers``: replica placement on brokers and racks.

The three goals (Kafka's own words, paraphrased): spread replicas evenly over brokers;
spread the other replicas of a broker's partitions over the other brokers; and, when
every broker has a rack, put a partition's replicas on different racks where possible.

Rack-unaware, numbered steps:

1. ``start`` = ``fixed_start_index`` if ≥ 0, else a random broker index; the follower
   shift starts at the same fixed index, else at another random index.
2. Partition ``p`` (counting from ``max(0, start_partition_id)``): its first replica
   (the preferred leader) is ``brokers[(p + start) % n]``.
3. Each time ``p`` reaches a multiple of ``n`` (``p > 0``) the shift grows by one, so the
   followers of the next round differ from the last.
4. Follower ``j`` of the partition sits ``1 + (shift + j) % (n - 1)`` places after the
   leader (never on the leader itself).

Rack-aware: the same round robin over the **rack-alternated** broker list (racks sorted
by name; take the next broker of each rack in turn, each rack's brokers in id order),
with the shift multiplied by the number of racks, and a follower candidate skipped
while its rack already holds a replica and some rack holds none, or while the broker
already holds one and some broker holds none.

Worked example (Kafka's): brokers ``0:rack1, 1:rack3, 2:rack3, 3:rack2, 4:rack2,
5:rack1`` → alternated list ``0, 3, 1, 5, 4, 2``; with 7 partitions, RF 3, start 0:
``0:[0,3,1] 1:[3,1,5] 2:[1,5,4] 3:[5,4,2] 4:[4,2,0] 5:[2,0,3] 6:[0,4,2]``.

Errors as Kafka's: partitions ≤ 0 (``InvalidPartitionsError``), replication factor ≤ 0
or above the broker count (``InvalidReplicationFactorError``), racks on some brokers
only (``InvalidReplicaAssignmentError``). Pure; the random start comes from the
``rng`` argument (a seeded ``random.Random``), so results are reproducible. Thread-safe.
"""

from __future__ import annotations

import random
from typing import Iterable, Mapping, NamedTuple, Optional

from kafkasim.errors import InvalidPartitionsError, InvalidReplicaAssignmentError, InvalidReplicationFactorError

__all__ = ["BrokerMetadata", "assign_replicas_to_brokers", "rack_alternated_broker_list", "parse_brokers"]


class BrokerMetadata(NamedTuple):
    """A broker id and its rack (``None``: no rack)."""

    id: int
    rack: Optional[str] = None


def rack_alternated_broker_list(broker_racks: Mapping[int, str]) -> list[int]:
    """Brokers interleaved by rack: racks sorted by name, each rack's brokers by id.

    >>> rack_alternated_broker_list({0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"})
    [0, 3, 1, 5, 4, 2]
    """
    by_rack: dict[str, list[int]] = {}
    for broker, rack in broker_racks.items():
        by_rack.setdefault(rack, []).append(broker)
    queues = [sorted(by_rack[r]) for r in sorted(by_rack)]
    out: list[int] = []
    depth = 0
    while len(out) < len(broker_racks):
        out.extend(q[depth] for q in queues if depth < len(q))
        depth += 1
    return out


def _follower_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def assign_replicas_to_brokers(brokers: Iterable[BrokerMetadata], n_partitions: int, replication_factor: int,
                               fixed_start_index: int = -1, start_partition_id: int = -1,
                               rng: Optional[random.Random] = None) -> dict[int, list[int]]:
    """``{partition: [replica broker ids]}`` as Kafka's ``assignReplicasToBrokers`` (see the module docstring)."""
    brokers = [b if isinstance(b, BrokerMetadata) else BrokerMetadata(*b) for b in brokers]
    if n_partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.")
    with_rack = [b for b in brokers if b.rack is not None]
    if with_rack and len(with_rack) != len(brokers):
        raise InvalidReplicaAssignmentError(
            "Not all brokers have rack information for replica rack aware assignment.")
    rng = rng or random.Random(0)
    if not with_rack:
        return _rack_unaware([b.id for b in brokers], n_partitions, replication_factor,
                             fixed_start_index, start_partition_id, rng)
    return _rack_aware({b.id: b.rack for b in brokers}, n_partitions, replication_factor,
                       fixed_start_index, start_partition_id, rng)


def _starts(n: int, fixed_start_index: int, rng: random.Random) -> tuple[int, int]:
    if fixed_start_index >= 0:
        return fixed_start_index, fixed_start_index
    start = rng.randrange(n)
    return start, rng.randrange(n)


def _rack_unaware(ids: list[int], n_partitions: int, rf: int, fixed_start_index: int,
                  start_partition_id: int, rng: random.Random) -> dict[int, list[int]]:
    n = len(ids)
    start, shift = _starts(n, fixed_start_index, rng)
    out = {}
    p = max(0, start_partition_id)
    for _ in range(n_partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        out[p] = [ids[first]] + [ids[_follower_index(first, shift, j, n)] for j in range(rf - 1)]
        p += 1
    return out


def _rack_aware(racks: dict[int, str], n_partitions: int, rf: int, fixed_start_index: int,
                start_partition_id: int, rng: random.Random) -> dict[int, list[int]]:
    n_racks = len(set(racks.values()))
    arranged = rack_alternated_broker_list(racks)
    n = len(arranged)
    start, shift = _starts(n, fixed_start_index, rng)
    out = {}
    p = max(0, start_partition_id)
    for _ in range(n_partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        leader = arranged[first]
        replicas, used_racks, used_brokers = [leader], {racks[leader]}, {leader}
        k = 0
        for _ in range(rf - 1):
            while True:
                broker = arranged[_follower_index(first, shift * n_racks, k, n)]
                rack = racks[broker]
                k += 1
                if ((rack not in used_racks or len(used_racks) == n_racks)
                        and (broker not in used_brokers or len(used_brokers) == n)):
                    replicas.append(broker)
                    used_racks.add(rack)
                    used_brokers.add(broker)
                    break
        out[p] = replicas
        p += 1
    return out


def parse_brokers(text: str) -> list[BrokerMetadata]:
    """``"0:rack1,1:rack3"`` or ``"0,1,2"`` → brokers; an error names the bad item."""
    from kafkasim.errors import InvalidArgumentError

    out, seen = [], set()
    for item in (s.strip() for s in text.split(",")):
        bid, sep, rack = item.partition(":")
        try:
            broker = int(bid)
        except ValueError:
            raise InvalidArgumentError(f"broker {item!r}: expected ID or ID:RACK") from None
        if broker < 0 or broker in seen or (sep and not rack):
            raise InvalidArgumentError(f"broker {item!r}: ids must be distinct non-negative integers"
                                       f"{' and a rack must follow the colon' if sep and not rack else ''}")
        seen.add(broker)
        out.append(BrokerMetadata(broker, rack if sep else None))
    return out
