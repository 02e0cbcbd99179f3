"""The assignor contract shared by every partition assignor: Subscription, Assignor, ordering helpers.

An assignor turns ``partitions_per_topic`` (topic -> partition count) and
``subscriptions`` (member id -> :class:`Subscription`) into ``member id -> sorted
list of TopicPartition``.  It mirrors Kafka's ``AbstractPartitionAssignor.assign``.
The range and sticky assignors also take ``partition_racks`` (TopicPartition -> the
racks of its replicas), Kafka's ``PartitionInfo`` replicas reduced to their racks, and
are then rack-aware as Kafka >= 3.5 (KIP-881): see :func:`use_rack_aware_assignment`.

Invariants every assignor here keeps (tests/assignors checks them):
- ``assign`` is a pure function of its arguments: no state is kept between calls,
  no clock, no randomness, no Python ``hash()``; the same input gives the same output.
- every member id of ``subscriptions`` is a key of the result (possibly with ``[]``);
  every list is sorted (topic, then partition);
- a topic missing from ``partitions_per_topic`` (or with 0 partitions) is skipped, as
  Kafka skips "topics with no metadata";
- members are ordered as Kafka's ``AbstractPartitionAssignor.MemberInfo.compareTo``
  orders them (:func:`member_sort_key`): static members (with a ``group_instance_id``)
  first, by instance id; then dynamic members by member id.  Strings compare as Java's
  ``String.compareTo`` does (UTF-16 code units, :func:`java_str_key`).

Thread-safety: everything here is immutable or a pure function; safe to share.
"""

from __future__ import annotations

from itertools import repeat
from typing import Collection, Iterable, Mapping, NamedTuple, Optional, Sequence

from kafkasim.errors import IllegalStateError
from kafkasim.types import TopicPartition

__all__ = [
    "Subscription", "Assignor", "EAGER", "COOPERATIVE", "DEFAULT_GENERATION",
    "java_str_key", "member_sort_key", "sorted_members", "partition_sort_key",
    "all_partitions_sorted", "revoked_partitions", "check_assignment",
    "topic_partitions", "sort_partitions", "java_order_is_python_order",
    "PartitionRacks", "RackAwareAssignor", "consumer_rack", "use_rack_aware_assignment",
    "replica_racks",
]

EAGER = "eager"
"""Kafka's ``RebalanceProtocol.EAGER``: every member revokes everything before a rebalance."""
COOPERATIVE = "cooperative"
"""Kafka's ``RebalanceProtocol.COOPERATIVE`` (KIP-429): only partitions that change owner are revoked."""
DEFAULT_GENERATION = -1
"""Kafka's ``AbstractStickyAssignor.DEFAULT_GENERATION``: the owned partitions carry no generation."""


class Subscription(NamedTuple):
    """What one member sends in its JoinGroup: topics, owned partitions and identity.

    ``owned_partitions`` is what the member owned in generation ``generation_id``
    (KIP-429 ``ownedPartitions``; Kafka >= 3.x also sends the generation).  A
    ``group_instance_id`` (static membership) changes the member sort order; ``rack_id``
    is the member's ``client.rack`` (KIP-881): the range and sticky assignors use it when
    ``partition_racks`` is given (``None`` or ``""`` means "no rack", as in Kafka).
    """

    topics: Sequence[str]
    user_data: Optional[bytes] = None
    owned_partitions: Sequence[TopicPartition] = ()
    generation_id: int = DEFAULT_GENERATION
    group_instance_id: Optional[str] = None
    rack_id: Optional[str] = None


class Assignor:
    """Base class of partition assignors (Kafka's ``ConsumerPartitionAssignor``).

    Subclasses set ``name`` (the ``partition.assignment.strategy`` config name) and
    ``supported_protocols``, and implement the pure :meth:`assign`.  A custom assignor
    only needs these two attributes and ``assign``; register it with
    :func:`kafkasim.assignors.register_assignor`.
    """

    name: str = ""
    supported_protocols: tuple[str, ...] = (EAGER,)

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription],
               partition_racks: Optional[PartitionRacks] = None) -> dict[str, list[TopicPartition]]:
        """Return member id -> sorted partitions; every member of ``subscriptions`` is a key.

        ``partition_racks`` (optional) maps a partition to the racks of its replicas; a
        rack-unaware assignor ignores it.
        """
        raise NotImplementedError

    def on_assignment(self, assignment: Sequence[TopicPartition], generation_id: int) -> None:
        """Called on a member after SyncGroup.  The built-in assignors keep no state: no-op."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class RackAwareAssignor(Assignor):
    """An assignor that follows Kafka's KIP-881 rack-aware logic when given ``partition_racks``.

    ``prefer_rack_aware_logic`` is Kafka's test-only ``AbstractPartitionAssignor.preferRackAwareLogic``:
    it runs the rack-aware code even when every partition has a replica on every rack (where
    Kafka, and kafkasim by default, skip it because it cannot improve anything).  Kafka's
    tests use it to show that the rack-aware code then gives the rack-unaware result; so do
    kafkasim's.  It is fixed at construction; ``assign`` stays a pure function.
    """

    def __init__(self, *, prefer_rack_aware_logic: bool = False) -> None:
        self.prefer_rack_aware_logic = bool(prefer_rack_aware_logic)


PartitionRacks = Mapping[TopicPartition, Collection[Optional[str]]]
"""TopicPartition -> the racks of its replicas (Kafka: ``PartitionInfo.replicas()[i].rack()``).

A partition missing from the mapping, or whose racks are all ``None``, has no known rack."""


def consumer_rack(sub: Subscription) -> Optional[str]:
    """The member's rack, or ``None`` when it has none (Kafka ignores an empty ``client.rack``)."""
    return sub.rack_id or None


def replica_racks(partition_racks: PartitionRacks, tp: TopicPartition) -> frozenset:
    """The set of known racks of ``tp``'s replicas (``None`` racks dropped; missing = empty)."""
    racks = partition_racks.get(tp)
    if not racks:
        return frozenset()
    return frozenset(r for r in racks if r is not None)


def use_rack_aware_assignment(consumer_racks: Collection[str], all_partition_racks: Collection[str],
                              racks_per_partition: Iterable[frozenset], prefer: bool = False) -> bool:
    """Kafka's ``AbstractPartitionAssignor.useRackAwareAssignment``.

    False when no member has a rack, or no member's rack holds any replica; otherwise true
    when some partition's replicas are on only a subset of ``all_partition_racks`` (with
    every partition on every rack, rack alignment cannot change anything); ``prefer``
    (Kafka's test-only ``preferRackAwareLogic``) makes that last case true as well.

    >>> use_rack_aware_assignment({"a"}, {"a", "b"}, [frozenset({"a", "b"})])
    False
    >>> use_rack_aware_assignment({"a"}, {"a", "b"}, [frozenset({"a"}), frozenset({"b"})])
    True
    """
    if not consumer_racks or not set(consumer_racks) & set(all_partition_racks):
        return False
    if prefer:
        return True
    everywhere = frozenset(all_partition_racks)
    return any(racks != everywhere for racks in racks_per_partition)


def java_str_key(s: str) -> str:
    """A sort key that orders strings as Java's ``String.compareTo`` (UTF-16 code units).

    Python compares code points; the two orders differ only between a supplementary
    character (> U+FFFF, a surrogate pair in UTF-16) and a BMP character >= U+E000.
    """
    if s.isascii():
        return s
    return s.encode("utf-16-be").decode("latin-1")


def member_sort_key(member_id: str, group_instance_id: Optional[str]) -> tuple:
    """Kafka's ``MemberInfo.compareTo``: static members first by instance id, then member ids."""
    if group_instance_id is not None:
        return (0, java_str_key(group_instance_id), java_str_key(member_id))
    return (1, java_str_key(member_id), "")


def sorted_members(member_ids: Iterable[str], subscriptions: Mapping[str, Subscription]) -> list[str]:
    """``member_ids`` in Kafka's MemberInfo order (see :func:`member_sort_key`)."""
    return sorted(member_ids, key=lambda m: member_sort_key(m, subscriptions[m].group_instance_id))


def partition_sort_key(tp: TopicPartition) -> tuple:
    """Order of Kafka's partition comparators: topic (Java string order), then partition."""
    return (java_str_key(tp.topic), tp.partition)


_new_tuple = tuple.__new__


def topic_partitions(topic: str, start: int, stop: int) -> list[TopicPartition]:
    """``[TopicPartition(topic, p) for p in range(start, stop)]``, built at C speed."""
    return [_new_tuple(TopicPartition, pair) for pair in zip(repeat(topic), range(start, stop))]


def java_order_is_python_order(strings: Iterable[str]) -> bool:
    """True when Python's and Java's string orders agree on ``strings``: all below U+E000.

    Kafka topic names are ASCII (``[a-zA-Z0-9._-]``), so this is the normal case and lets
    hot paths sort with Python's native tuple order instead of a key function.
    """
    return all(s.isascii() or max(s) < "\ue000" for s in strings)


def sort_partitions(tps: Iterable[TopicPartition], safe: Optional[bool] = None) -> list[TopicPartition]:
    """``tps`` sorted by topic (Java order), then partition; ``safe`` = topics known Java-safe."""
    tps = list(tps)
    if safe is None:
        safe = java_order_is_python_order({tp[0] for tp in tps})
    if safe:
        tps.sort()
    else:
        tps.sort(key=partition_sort_key)
    return tps


def all_partitions_sorted(partitions_per_topic: Mapping[str, int],
                          topics: Iterable[str]) -> list[TopicPartition]:
    """Every partition of ``topics`` that has metadata, sorted by topic then partition."""
    out: list[TopicPartition] = []
    for topic in sorted(set(topics), key=java_str_key):
        n = partitions_per_topic.get(topic) or 0
        out.extend(TopicPartition(topic, p) for p in range(n))
    return out


def revoked_partitions(owned: Iterable[TopicPartition],
                       assigned: Iterable[TopicPartition]) -> list[TopicPartition]:
    """Partitions a member owned and is no longer assigned (what it must revoke), sorted.

    Under the cooperative protocol a member revokes exactly these; under the eager
    protocol it revokes everything it owned before joining.
    """
    keep = set(assigned)
    return sorted({tp for tp in owned if tp not in keep}, key=partition_sort_key)


def check_assignment(assignor_name: str, partitions_per_topic: Mapping[str, int],
                     subscriptions: Mapping[str, Subscription],
                     assignment: Mapping[str, Sequence[TopicPartition]],
                     *, complete: bool = True) -> None:
    """Fail loudly (IllegalStateError) unless ``assignment`` is valid for the input.

    Valid: exactly the members of ``subscriptions``; each partition at most once
    (exactly once when ``complete``) and only to a member subscribed to its topic.
    """
    if set(assignment) != set(subscriptions):
        raise IllegalStateError(
            f"{assignor_name}: assignment members {sorted(assignment)} != subscribed members "
            f"{sorted(subscriptions)}")
    seen: dict[TopicPartition, str] = {}
    for member, tps in assignment.items():
        topics = set(subscriptions[member].topics)
        for tp in tps:
            if tp.topic not in topics:
                raise IllegalStateError(f"{assignor_name}: {tp} assigned to {member!r}, "
                                        f"which is not subscribed to {tp.topic!r}")
            n = partitions_per_topic.get(tp.topic, 0)
            if not 0 <= tp.partition < n:
                raise IllegalStateError(f"{assignor_name}: {tp} assigned to {member!r} does not exist "
                                        f"(topic has {n} partitions)")
            if tp in seen:
                raise IllegalStateError(f"{assignor_name}: {tp} assigned to both {seen[tp]!r} and {member!r}")
            seen[tp] = member
    if complete:
        subscribed = {t for s in subscriptions.values() for t in s.topics}
        for tp in all_partitions_sorted(partitions_per_topic, subscribed):
            if tp not in seen:
                raise IllegalStateError(f"{assignor_name}: subscribed partition {tp} is not assigned")
