"""Fixed Partitions vs hash-mod-N: how many keys (and bytes) change node when nodes are added.

Two ways to spread keys over ``N`` nodes:

(a) **Fixed Partitions** (Kafka's way): a key's partition is ``hash(key) % P`` and never
    changes; the ``P`` partitions are owned by nodes, and when the node count changes
    only partitions move — as few as keep every node within one of ``P / N``
    (computed by :func:`~kafkasim.placement.reassign.plan_reassignment` with RF 1).
(b) **hash mod N**: a key's node is ``hash(key) % N`` directly, so changing ``N`` moves a
    key whenever ``hash % N_before != hash % N_after`` — for 3 → 5 nodes, 12 of every 15
    hash values (80 %).

Partitions start on nodes round robin (partition ``p`` on node ``p % N_before``, as
Kafka's placement does with start 0). Nodes are ``0 .. N-1``; added nodes take the next
ids. The hash is injected (``key_hash(key) -> int >= 0``; Kafka's is
``toPositive(murmur2(key))``, ``kafkasim.partitioning.hashing``), so this module stays in
the pure layer. Worked example: 3 → 5 nodes with 60 partitions moves 24/60 partitions
(2/5) under (a) against ~80 % of keys under (b). Pure and deterministic; thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from kafkasim.errors import InvalidArgumentError, InvalidPartitionsError
from kafkasim.placement.reassign import plan_reassignment
from kafkasim.types import TopicPartition

__all__ = ["RemapReport", "partition_owners", "compare_remapping"]

_TOPIC = "keys"


@dataclass(frozen=True)
class RemapReport:
    """Keys/bytes that change node under each scheme, and partitions moved under (a)."""

    keys: int
    bytes: int
    partitions: int
    partitions_moved: int
    fixed_keys_moved: int
    fixed_bytes_moved: int
    modn_keys_moved: int
    modn_bytes_moved: int

    @staticmethod
    def _frac(part: int, whole: int) -> float:
        return part / whole if whole else 0.0

    @property
    def fixed_keys_fraction(self) -> float:
        return self._frac(self.fixed_keys_moved, self.keys)

    @property
    def fixed_bytes_fraction(self) -> float:
        return self._frac(self.fixed_bytes_moved, self.bytes)

    @property
    def modn_keys_fraction(self) -> float:
        return self._frac(self.modn_keys_moved, self.keys)

    @property
    def modn_bytes_fraction(self) -> float:
        return self._frac(self.modn_bytes_moved, self.bytes)

    def as_dict(self) -> dict:
        return dict(vars(self)) | {
            "fixed_keys_fraction": self.fixed_keys_fraction, "fixed_bytes_fraction": self.fixed_bytes_fraction,
            "modn_keys_fraction": self.modn_keys_fraction, "modn_bytes_fraction": self.modn_bytes_fraction}


def partition_owners(n_partitions: int, nodes_before: int, nodes_after: int) -> tuple[dict[int, int], dict[int, int]]:
    """Owner node of every partition before (round robin) and after (fewest moves, balanced)."""
    if n_partitions <= 0:
        raise InvalidPartitionsError(f"partitions must be > 0, got {n_partitions}")
    for name, n in (("nodes before", nodes_before), ("nodes after", nodes_after)):
        if n <= 0:
            raise InvalidArgumentError(f"{name} must be > 0, got {n}")
    before = {p: p % nodes_before for p in range(n_partitions)}
    current = {TopicPartition(_TOPIC, p): [node] for p, node in before.items()}
    plan = plan_reassignment(current, {n: None for n in range(nodes_after)})
    return before, {tp.partition: replicas[0] for tp, replicas in plan.items()}


def compare_remapping(keys: Sequence[bytes], n_partitions: int, nodes_before: int, nodes_after: int,
                      key_hash: Callable[[bytes], int], sizes: Optional[Sequence[int]] = None) -> RemapReport:
    """Count keys and bytes changing node under Fixed Partitions and under hash mod N.

    ``sizes[i]`` is the byte size of ``keys[i]``'s data (default 1 per key, so bytes =
    keys). Null keys are refused: Kafka does not hash them.
    """
    if sizes is not None and len(sizes) != len(keys):
        raise InvalidArgumentError(f"sizes: {len(sizes)} values for {len(keys)} keys")
    before, after = partition_owners(n_partitions, nodes_before, nodes_after)
    total_bytes = fixed_keys = fixed_bytes = modn_keys = modn_bytes = 0
    for i, key in enumerate(keys):
        if key is None:
            raise InvalidArgumentError(f"keys[{i}] is null: only keyed records have a fixed partition")
        h = key_hash(key)
        if h < 0:
            raise InvalidArgumentError(f"key_hash returned {h} for keys[{i}]; it must be >= 0 (use toPositive)")
        size = 1 if sizes is None else sizes[i]
        if size < 0:
            raise InvalidArgumentError(f"sizes[{i}] must be >= 0, got {size}")
        total_bytes += size
        p = h % n_partitions
        if before[p] != after[p]:
            fixed_keys += 1
            fixed_bytes += size
        if h % nodes_before != h % nodes_after:
            modn_keys += 1
            modn_bytes += size
    moved = sum(1 for p in before if before[p] != after[p])
    return RemapReport(len(keys), total_bytes, n_partitions, moved, fixed_keys, fixed_bytes, modn_keys, modn_bytes)
