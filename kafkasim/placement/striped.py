"""Kafka's KRaft ``StripedReplicaPlacer``: the placement of Kafka ≥ 3 (controller quorum).

Where ``admin_utils`` (ZooKeeper-era ``AdminUtils.assignReplicasToBrokers``) walks one
rack-alternated broker list with a growing follower shift, the striped placer keeps
**one round-robin cursor per rack** and one over the racks, and walks them per
partition. Numbered steps (Kafka's, reproduced decision for decision):

1. Group the usable brokers by rack (brokers without a rack form the rack ``None``),
   each rack keeping a fenced and an unfenced list. Initialise every rack in Java
   ``HashMap`` iteration order: sort each list and draw its start offset with
   ``nextInt(size)`` — unless the topic already has partitions, in which case the
   unfenced cursor resumes one after the last broker of that rack the topic used.
2. Sort the rack names (``None`` first). The rack cursor resumes one after the rack of
   the last partition's leader, else starts at ``nextInt(#racks)``.
3. Per partition (one *epoch* each): every list advances its offset by one when it sees
   a new epoch. The leader is the next **unfenced** broker, trying racks from the rack
   cursor on. Followers take the next broker (unfenced first, then fenced) of the
   following racks in turn, skipping the leader's rack once, so replicas stripe across
   racks before any rack repeats.
4. After as many partitions as there are unfenced brokers (when more than one), shuffle
   the rack order and every broker list (``Collections.shuffle``) and restart the epochs,
   so the pattern does not repeat. The rack cursor advances by one per partition.

Worked example (Kafka's ``testSuccessfulPlacement``, ``MockRandom``): brokers 0, 3, 2, 1,
no racks, 5 partitions, RF 3 → ``[2,3,0] [3,0,1] [0,1,2] [1,2,3] [1,0,2]``.

Errors (``InvalidReplicationFactorError``, Kafka's messages): ``Invalid replication
factor 0: the replication factor must be positive.``, ``All brokers are currently
fenced.``, ``The target replication factor of 3 cannot be reached because only 2
broker(s) are registered.``; partitions ≤ 0 give ``InvalidPartitionsError`` as the
controller's topic validation does.

Randomness comes from a Java-compatible source (:mod:`kafkasim.placement.java_random`),
so Kafka's ``MockRandom`` expectations reproduce exactly. Pure apart from the ``rng``
it is given. Thread-safety: a :class:`RackList` is mutable (a cursor per rack) and must
not be shared; :func:`striped_place` builds its own and is safe to call concurrently
with distinct ``rng`` objects.
"""

from __future__ import annotations

from typing import Iterable, NamedTuple, Optional, Sequence

from kafkasim.errors import InvalidPartitionsError, InvalidReplicationFactorError
from kafkasim.placement.java_random import JavaRandom

__all__ = ["UsableBroker", "BrokerList", "RackList", "striped_place", "java_hashmap_order"]

_MISSING = object()


class UsableBroker(NamedTuple):
    """A registered broker as the KRaft controller sees it: id, rack (or ``None``), fenced."""

    id: int
    rack: Optional[str] = None
    fenced: bool = False


def _java_string_hash(s: str) -> int:
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def java_hashmap_order(keys: Sequence[Optional[str]]) -> list[Optional[str]]:
    """The iteration order of a ``java.util.HashMap<Optional<String>, _>`` filled with
    ``keys`` in this order (buckets ascending, insertion order within a bucket)."""
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: Optional[str]) -> int:
        h = 0 if key is None else _java_string_hash(key)
        return (h ^ (h >> 16)) & (capacity - 1)

    return [k for _, _, k in sorted((bucket(k), i, k) for i, k in enumerate(keys))]


class BrokerList:
    """Kafka's ``BrokerList``: a sorted list walked from a per-epoch offset."""

    def __init__(self, brokers: Iterable[int] = ()) -> None:
        self.brokers = list(brokers)
        self._index = 0
        self._offset = 0
        self._epoch = 0

    def initialize(self, rng, previous_offset: Optional[int] = None) -> None:
        """Sort; start at a random offset, or one after ``previous_offset``."""
        if self.brokers:
            self.brokers.sort()
            if previous_offset is None:
                self._offset = rng.next_int(len(self.brokers))
            else:
                self._offset = (previous_offset + 1) % len(self.brokers)

    def next(self, epoch: int) -> int:
        """The next broker of this epoch, or -1 once every broker was returned in it."""
        if not self.brokers:
            return -1
        if epoch != self._epoch:
            self._epoch, self._index = epoch, 0
            self._offset = (self._offset + 1) % len(self.brokers)
        if self._index >= len(self.brokers):
            return -1
        broker = self.brokers[(self._index + self._offset) % len(self.brokers)]
        self._index += 1
        return broker


class _Rack:
    def __init__(self) -> None:
        self.fenced = BrokerList()
        self.unfenced = BrokerList()

    def next(self, epoch: int) -> int:
        broker = self.unfenced.next(epoch)
        return broker if broker >= 0 else self.fenced.next(epoch)


def _check_positive(replication_factor: int) -> None:
    if replication_factor <= 0:
        raise InvalidReplicationFactorError(
            f"Invalid replication factor {replication_factor}: the replication factor must be positive.")


def _check_enough(replication_factor: int, total: int) -> None:
    if replication_factor > total:
        raise InvalidReplicationFactorError(
            f"The target replication factor of {replication_factor} cannot be reached because only "
            f"{total} broker(s) are registered.")


def _check_unfenced(unfenced: int) -> None:
    if unfenced == 0:
        raise InvalidReplicationFactorError("All brokers are currently fenced.")


class RackList:
    """Kafka's ``RackList``: the racks, their cursors and the epoch; :meth:`place` one partition."""

    def __init__(self, rng, brokers: Iterable[UsableBroker],
                 existing: Sequence[Sequence[int]] = ()) -> None:
        self._rng = rng
        self._racks: dict[Optional[str], _Rack] = {}
        rack_of: dict[int, Optional[str]] = {}
        registered: dict[Optional[str], list[int]] = {}
        total = unfenced = 0
        for b in brokers:
            b = b if isinstance(b, UsableBroker) else UsableBroker(*b)
            rack_of[b.id] = b.rack
            rack = self._racks.setdefault(b.rack, _Rack())
            (rack.fenced if b.fenced else rack.unfenced).brokers.append(b.id)
            unfenced += not b.fenced
            total += 1
        for name in java_hashmap_order(list(self._racks)):
            rack = self._racks[name]
            previous = previous_broker_offset(rack_of, existing, name, rack.unfenced.brokers)
            rack.fenced.initialize(rng)
            rack.unfenced.initialize(rng, previous)
        self.rack_names: list[Optional[str]] = sorted(
            self._racks, key=lambda r: (r is not None, (r or "").encode("utf-16-be")))
        self.num_total_brokers, self.num_unfenced_brokers = total, unfenced
        self._epoch = 0
        previous_rack = previous_rack_offset(rack_of, existing, self.rack_names)
        if previous_rack is not None:
            self._offset = (previous_rack + 1) % len(self.rack_names)
        else:
            self._offset = rng.next_int(len(self.rack_names)) if self.rack_names else 0

    def place(self, replication_factor: int) -> list[int]:
        """The replicas of the next partition, leader first (steps 3–4 of the module docstring)."""
        _check_positive(replication_factor)
        _check_enough(replication_factor, self.num_total_brokers)
        _check_unfenced(self.num_unfenced_brokers)
        if self._epoch == self.num_unfenced_brokers and self.num_unfenced_brokers > 1:
            self._rng.shuffle(self.rack_names)
            for rack in self._racks.values():
                self._rng.shuffle(rack.fenced.brokers)
                self._rng.shuffle(rack.unfenced.brokers)
            self._epoch = 0
        if self._offset == len(self.rack_names):
            self._offset = 0
        n = len(self.rack_names)
        first = self._offset
        while True:
            leader = self._racks[self.rack_names[first]].unfenced.next(self._epoch)
            if leader >= 0:
                break
            first = (first + 1) % n
        replicas = [leader]
        index = self._offset
        for _ in range(1, replication_factor):
            broker = -1
            while broker < 0:
                if index == first:
                    first = -1  # the leader's rack is skipped once
                else:
                    broker = self._racks[self.rack_names[index]].next(self._epoch)
                index = (index + 1) % n
            replicas.append(broker)
        self._epoch += 1
        self._offset += 1
        return replicas


def previous_rack_offset(rack_of: dict, existing: Sequence[Sequence[int]],
                         rack_names: Sequence[Optional[str]]) -> Optional[int]:
    """Kafka's ``tryGetPreviousRackOffset``: index of the last partition's leader's rack."""
    if not existing:
        return None
    rack = rack_of.get(existing[-1][0], _MISSING)
    if rack is _MISSING:
        return None
    return rack_names.index(rack) if rack in rack_names else None


def previous_broker_offset(rack_of: dict, existing: Sequence[Sequence[int]], rack: Optional[str],
                           unfenced: Sequence[int]) -> Optional[int]:
    """Kafka's ``tryGetPreviousBrokerOffset``: where in ``unfenced`` (as registered, before
    sorting, as Kafka) the last broker of ``rack`` the topic used sits; ``None`` if nowhere."""
    for replicas in reversed(existing):
        for broker in replicas:
            broker_rack = rack_of.get(broker, _MISSING)
            if broker_rack is _MISSING:
                continue
            if broker_rack == rack:
                return list(unfenced).index(broker) if broker in unfenced else None
    return None


def striped_place(brokers: Iterable[UsableBroker], n_partitions: int, replication_factor: int,
                  existing: Sequence[Sequence[int]] = (), rng=None,
                  start_partition: Optional[int] = None) -> dict[int, list[int]]:
    """``{partition: replicas}`` as Kafka's ``StripedReplicaPlacer.place``.

    ``existing``: the topic's current replica lists in partition order (when adding
    partitions); numbering starts at ``start_partition`` (default ``len(existing)``).
    ``rng``: a :class:`~kafkasim.placement.java_random.JavaRandom` or ``MockRandom``
    (default ``JavaRandom(0)``).
    """
    if n_partitions <= 0:
        raise InvalidPartitionsError("Number of partitions was set to an invalid non-positive value.")
    rack_list = RackList(rng if rng is not None else JavaRandom(0), brokers, existing)
    _check_positive(replication_factor)  # Kafka's order here: fenced before too few
    _check_unfenced(rack_list.num_unfenced_brokers)
    _check_enough(replication_factor, rack_list.num_total_brokers)
    first = len(existing) if start_partition is None else start_partition
    return {first + i: rack_list.place(replication_factor) for i in range(n_partitions)}
