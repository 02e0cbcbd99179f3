"""Invariants of the server-side assignors (``uniform``, ``range``) over generated groups, and
the ``group.consumer.assignors`` registry.

- every partition of a subscribed topic goes to exactly one member subscribed to it;
- uniform, homogeneous: member sizes differ by at most one (Kafka's builder guarantee); the
  heterogeneous builder gives the same bound when the subscriptions happen to be identical;
- stickiness: fed its own output as the current assignment, the assignor returns it unchanged;
- determinism: the same input gives the same output; range ignores the member map's order.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings, strategies as st

from kafkasim.assignors.group_spec import (
    HETEROGENEOUS, HOMOGENEOUS, GroupSpec, MemberSubscription, PartitionAssignorError, TopicsImage,
)
from kafkasim.assignors.server import (
    GROUP_CONSUMER_ASSIGNORS_DEFAULT, server_assignor, server_assignor_names, server_assignors,
)
from kafkasim.assignors.server_range import ServerRangeAssignor
from kafkasim.assignors.uniform import UniformAssignor
from kafkasim.errors import InvalidConfigurationError


@st.composite
def groups(draw, homogeneous: bool):
    """(spec, topics image): random topic ids, partition counts, members, prior ownership."""
    topic_ids = draw(st.lists(st.integers(0, 2**128 - 1).map(lambda i: uuid.UUID(int=i)),
                              min_size=1, max_size=4, unique=True))
    partitions = {t: draw(st.integers(1, 8)) for t in topic_ids}
    member_ids = draw(st.lists(st.text("ABCDEFG", min_size=1, max_size=3), min_size=1, max_size=6, unique=True))
    if homogeneous:
        common = frozenset(draw(st.lists(st.sampled_from(topic_ids), min_size=1, unique=True)))
        subscriptions = {m: common for m in member_ids}
    else:
        subscriptions = {m: frozenset(draw(st.lists(st.sampled_from(topic_ids), unique=True))) for m in member_ids}
    held: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in member_ids}
    for t, n in partitions.items():
        for p in range(n):
            owner = draw(st.sampled_from([None, *member_ids]))
            if owner is not None:
                held[owner].setdefault(t, set()).add(p)
    members = {m: MemberSubscription(subscriptions[m], {t: frozenset(ps) for t, ps in held[m].items()})
               for m in member_ids}
    return GroupSpec(members, HOMOGENEOUS if homogeneous else HETEROGENEOUS), TopicsImage(partitions)


def check_valid(spec: GroupSpec, image: TopicsImage, out) -> None:
    assert set(out) == set(spec.members)
    owners = {}
    for m, assignment in out.items():
        for t, ps in assignment.items():
            assert ps, f"{m} has an empty entry for {t}"
            assert t in spec.members[m].subscribed_topic_ids, f"{m} got {t} without subscribing"
            for p in ps:
                assert 0 <= p < image.num_partitions(t)
                assert (t, p) not in owners, f"{t}-{p} to {owners[(t, p)]} and {m}"
                owners[(t, p)] = m
    subscribed = {t for s in spec.members.values() for t in s.subscribed_topic_ids}
    assert set(owners) == {(t, p) for t in subscribed for p in range(image.num_partitions(t))}


def sizes(out):
    return [sum(len(ps) for ps in a.values()) for a in out.values()]


def resubmit(spec: GroupSpec, out) -> GroupSpec:
    return GroupSpec({m: MemberSubscription(s.subscribed_topic_ids, out[m]) for m, s in spec.members.items()},
                     spec.subscription_type)


@settings(max_examples=200, deadline=None)
@given(groups(homogeneous=True))
def test_uniform_homogeneous_valid_balanced_sticky_deterministic(group):
    spec, image = group
    out = UniformAssignor().assign(spec, image)
    check_valid(spec, image, out)
    assert max(sizes(out)) - min(sizes(out)) <= 1
    assert UniformAssignor().assign(spec, image) == out
    assert UniformAssignor().assign(resubmit(spec, out), image) == out


@settings(max_examples=200, deadline=None)
@given(groups(homogeneous=False))
def test_uniform_heterogeneous_valid_sticky_deterministic(group):
    spec, image = group
    out = UniformAssignor().assign(spec, image)
    check_valid(spec, image, out)
    assert UniformAssignor().assign(spec, image) == out
    assert UniformAssignor().assign(resubmit(spec, out), image) == out


@settings(max_examples=200, deadline=None)
@given(groups(homogeneous=True))
def test_uniform_heterogeneous_builder_balances_identical_subscriptions(group):
    spec, image = group
    out = UniformAssignor().assign(GroupSpec(spec.members, HETEROGENEOUS), image)
    check_valid(spec, image, out)
    assert max(sizes(out)) - min(sizes(out)) <= 1


@settings(max_examples=200, deadline=None)
@given(groups(homogeneous=False))
def test_range_valid_and_balanced_per_topic(group):
    spec, image = group
    out = ServerRangeAssignor().assign(spec, image)
    check_valid(spec, image, out)
    for t in {t for s in spec.members.values() for t in s.subscribed_topic_ids}:
        counts = [len(out[m].get(t, ())) for m, s in spec.members.items() if t in s.subscribed_topic_ids]
        assert max(counts) - min(counts) <= 1
    reordered = GroupSpec(dict(reversed(list(spec.members.items()))), spec.subscription_type)
    assert ServerRangeAssignor().assign(reordered, image) == out


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 6), st.integers(1, 12), st.integers(1, 4))
def test_range_co_partitions_equal_topics(members, partitions, topics):
    ids = [uuid.UUID(int=i + 1) for i in range(topics)]
    spec = GroupSpec({f"m{i}": MemberSubscription(frozenset(ids)) for i in range(members)})
    out = ServerRangeAssignor().assign(spec, TopicsImage({t: partitions for t in ids}))
    for assignment in out.values():
        assert len({assignment.get(t, frozenset()) for t in ids}) == 1


def test_registry_names_and_kafka_class_names():
    assert server_assignor_names() == ["uniform", "range"] == list(GROUP_CONSUMER_ASSIGNORS_DEFAULT)
    assert isinstance(server_assignor("uniform"), UniformAssignor)
    assert isinstance(server_assignor(" range "), ServerRangeAssignor)
    assert server_assignor("org.apache.kafka.coordinator.group.assignor.UniformAssignor").name == "uniform"
    assert server_assignor("org.apache.kafka.coordinator.group.assignor.RangeAssignor").name == "range"
    assert [a.name for a in server_assignors("range,uniform")] == ["range", "uniform"]


@pytest.mark.parametrize("bad", ["sticky", "cooperative-sticky", "", "Uniform"])
def test_registry_unknown_name_is_named(bad):
    with pytest.raises(InvalidConfigurationError, match=f"{bad!r}.*group.consumer.assignors"):
        server_assignor(bad)


def test_registry_rejects_duplicates_and_empty_lists():
    with pytest.raises(InvalidConfigurationError, match="'uniform' given twice"):
        server_assignors(["uniform", "range", "uniform"])
    with pytest.raises(InvalidConfigurationError, match="at least one assignor"):
        server_assignors(" , ")


@pytest.mark.parametrize("assignor", [UniformAssignor(), ServerRangeAssignor()], ids=["uniform", "range"])
def test_unknown_subscription_type_is_named(assignor):
    spec = GroupSpec({"A": MemberSubscription(frozenset({uuid.UUID(int=1)}))}, "homogeneous")
    with pytest.raises(PartitionAssignorError, match="'homogeneous'"):
        assignor.assign(spec, TopicsImage({uuid.UUID(int=1): 1}))


def test_package_exports_the_server_registry():
    import kafkasim.assignors as assignors
    assert assignors.server_assignor("range").name == "range"
    assert "uniform" not in assignors.assignor_names()  # the client-side registry is separate
