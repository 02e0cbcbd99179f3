"""get_assignor / register_assignor, protocols, the Java-order helpers and revoked_partitions."""

from __future__ import annotations

import pytest

from kafkasim.assignors import (
    COOPERATIVE, EAGER, Assignor, CooperativeStickyAssignor, RangeAssignor, Subscription, assignor_names,
    get_assignor, register_assignor, revoked_partitions,
)
from kafkasim.assignors._java import JavaHashSet, hashmap_order, string_hash, topic_partition_hash
from kafkasim.errors import InvalidConfigurationError
from kafkasim.types import TopicPartition


def test_builtin_names_and_protocols_match_kafka():
    assert {"range", "roundrobin", "sticky", "cooperative-sticky"} <= set(assignor_names())
    assert get_assignor("range").supported_protocols == (EAGER,)
    assert get_assignor("roundrobin").supported_protocols == (EAGER,)
    assert get_assignor("sticky").supported_protocols == (EAGER,)
    # CooperativeStickyAssignor.supportedProtocols() = [COOPERATIVE, EAGER]
    assert get_assignor("cooperative-sticky").supported_protocols == (COOPERATIVE, EAGER)


def test_get_assignor_accepts_name_class_and_instance():
    assert isinstance(get_assignor("range"), RangeAssignor)
    assert isinstance(get_assignor(CooperativeStickyAssignor), CooperativeStickyAssignor)
    inst = RangeAssignor()
    assert get_assignor(inst) is inst


def test_unknown_assignor_names_the_value():
    with pytest.raises(InvalidConfigurationError, match="'roundrobbin'.*partition.assignment.strategy"):
        get_assignor("roundrobbin")


class EverythingToFirst(Assignor):
    """A custom assignor: every partition to the alphabetically first member."""

    name = "everything-to-first"

    def assign(self, partitions_per_topic, subscriptions):
        out = {m: [] for m in subscriptions}
        if subscriptions:
            first = min(subscriptions)
            out[first] = [TopicPartition(t, p) for t in sorted(partitions_per_topic)
                          for p in range(partitions_per_topic[t])]
        return out


def test_register_custom_assignor_by_name():
    register_assignor(EverythingToFirst)
    assert "everything-to-first" in assignor_names()
    out = get_assignor("everything-to-first").assign({"t": 2}, {"b": Subscription(["t"]), "a": Subscription(["t"])})
    assert out == {"b": [], "a": [TopicPartition("t", 0), TopicPartition("t", 1)]}


def test_register_rejects_nameless_and_builtin_replacement():
    class NoName:
        def assign(self, ppt, subs):
            return {}

    with pytest.raises(InvalidConfigurationError, match="name"):
        register_assignor(NoName)

    class FakeRange(EverythingToFirst):
        name = "range"

    with pytest.raises(InvalidConfigurationError, match="'range' is a built-in"):
        register_assignor(FakeRange)
    assert isinstance(get_assignor("range"), RangeAssignor)


def test_revoked_partitions_is_owned_minus_assigned_sorted():
    owned = [TopicPartition("b", 1), TopicPartition("a", 2), TopicPartition("a", 0)]
    assert revoked_partitions(owned, [TopicPartition("a", 0)]) == [TopicPartition("a", 2), TopicPartition("b", 1)]
    assert revoked_partitions([], [TopicPartition("a", 0)]) == []


def test_java_string_hash_matches_known_values():
    # well-known Java values: "Aa" and "BB" collide at 2112; "polygenelubricants" is Integer.MIN_VALUE
    assert string_hash("") == 0
    assert string_hash("a") == 97
    assert string_hash("Aa") == string_hash("BB") == 2112
    assert string_hash("polygenelubricants") == 0x80000000
    assert string_hash("consumer1") == sum(ord(c) * 31 ** i for i, c in enumerate(reversed("consumer1"))) % 2**32
    assert string_hash("\u00e9t\u00e9") == (0xE9 * 31 * 31 + ord("t") * 31 + 0xE9)
    assert topic_partition_hash("a", 0) == 31 * 31 + 97


def test_hashmap_order_follows_bucket_index_then_insertion():
    # capacity 16: bucket = (h ^ h >>> 16) & 15; "a"=97 -> 1, "b"=98 -> 2, "q"=113 -> 1
    assert hashmap_order(["b", "q", "a"]) == ["q", "a", "b"]
    assert hashmap_order(["b", "a", "q"]) == ["a", "q", "b"]
    s = JavaHashSet(string_hash)
    for x in ("b", "q", "a"):
        s.add(x)
    assert s.first() == "q"
    s.discard("q")
    assert s.first() == "a" and len(s) == 2


def test_package_docstring_example_runs():
    import doctest

    import kafkasim.assignors as package

    result = doctest.testmod(package)
    assert result.attempted >= 1 and result.failed == 0


def test_assign_command_is_registered():
    import kafkasim.cli

    assert "kafkasim.cli.assign" in kafkasim.cli.COMMAND_MODULES
