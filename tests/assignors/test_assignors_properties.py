"""Invariants of every assignor, checked by hypothesis on random groups.

- validity: every subscribed partition is owned by exactly one subscribed member (for
  cooperative-sticky: at most one per round, exactly one once the follow-up rounds end);
  nobody gets a partition of a topic it did not subscribe to;
- balance as Kafka guarantees it: range within one per topic; roundrobin and sticky
  within one for identical subscriptions; sticky with unequal subscriptions passes
  Kafka's own verifyValidityAndBalance check;
- stickiness: with identical subscriptions, after a member leaves every survivor keeps all
  it had (nothing moves between survivors), and re-running any sticky assignment on its
  own output changes nothing;
- KIP-429: cooperative-sticky never gives a partition to a new owner in the round its old
  owner revokes it;
- purity: same input, same output; inputs are not modified.
"""

from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkasim.assignors import (
    CooperativeStickyAssignor, RangeAssignor, RoundRobinAssignor, StickyAssignor, Subscription, get_assignor,
)
from kafkasim.assignors.base import check_assignment
from kafkasim.types import TopicPartition

ALL = ["range", "roundrobin", "sticky", "cooperative-sticky"]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TOPICS = ["a", "b", "c", "d"]
MEMBER_IDS = ["m0", "m1", "m2", "m3", "m4", "m5", "m6", "consumer-10", "Z", "\u00e9"]


@st.composite
def groups(draw, identical=None, with_history=True):
    """(partitions_per_topic, subscriptions) with optional previous ownership and generations."""
    topics = TOPICS[:draw(st.integers(1, len(TOPICS)))]
    ppt = {t: draw(st.integers(0, 9)) for t in topics}
    members = draw(st.lists(st.sampled_from(MEMBER_IDS), min_size=1, max_size=7, unique=True))
    same = draw(st.booleans()) if identical is None else identical
    shared = draw(st.lists(st.sampled_from(topics), min_size=1, unique=True))
    all_tps = [TopicPartition(t, p) for t in topics for p in range(ppt[t])]
    subs = {}
    for m in members:
        mine = shared if same else draw(st.lists(st.sampled_from(topics), min_size=1, unique=True))
        owned, generation = [], -1
        if with_history and all_tps:
            owned = draw(st.lists(st.sampled_from(all_tps), unique=True, max_size=6))
            generation = draw(st.integers(-1, 3))
        static = draw(st.one_of(st.none(), st.sampled_from(["i1", "i2", "i3", "i4"])))
        if static in {s.group_instance_id for s in subs.values()}:
            static = None
        subs[m] = Subscription(list(mine), owned_partitions=owned, generation_id=generation,
                               group_instance_id=static)
    return ppt, subs


def counts(assignment):
    return sorted(len(v) for v in assignment.values())


def kafka_balance_check(subs, assignment):
    """AbstractStickyAssignorTest.verifyValidityAndBalance: two members whose counts differ by
    more than one never both hold partitions of the same topic."""
    members = sorted(assignment)
    for i, a in enumerate(members):
        for b in members[i + 1:]:
            if abs(len(assignment[a]) - len(assignment[b])) <= 1:
                continue
            assert not ({tp.topic for tp in assignment[a]} & {tp.topic for tp in assignment[b]}), (a, b, assignment)


def follow_up(ppt, subs, first, max_rounds=4):
    """Run cooperative rounds (owned = last assignment) until nothing is revoked; return the final one."""
    assignment, generation = first, max([s.generation_id for s in subs.values()] + [0]) + 1
    current = subs
    for _ in range(max_rounds):
        assert_cooperative_round(ppt, current, assignment)
        if not revoked_any(current, assignment):
            return current, assignment
        current = {m: s._replace(owned_partitions=list(assignment[m]), generation_id=generation)
                   for m, s in current.items()}
        generation += 1
        assignment = CooperativeStickyAssignor().assign(ppt, current)
    raise AssertionError(f"still revoking after {max_rounds} rounds: {assignment}")


def revoked_any(subs, assignment):
    return any(set(s.owned_partitions) - set(assignment[m]) for m, s in subs.items())


def assert_cooperative_round(ppt, subs, assignment):
    """No partition is added to one member in the same round another member revokes it."""
    added, revoked = set(), set()
    for m, s in subs.items():
        owned, now = set(s.owned_partitions), set(assignment[m])
        added |= now - owned
        revoked |= owned - now
    assert not (added & revoked), (added & revoked, subs, assignment)
    check_assignment("cooperative-sticky", ppt, subs, assignment, complete=False)


@SETTINGS
@given(groups())
def test_every_eager_assignor_is_valid_and_complete(group):
    ppt, subs = group
    for name in ("range", "roundrobin", "sticky"):
        check_assignment(name, ppt, subs, get_assignor(name).assign(ppt, subs), complete=True)


@SETTINGS
@given(groups())
def test_cooperative_sticky_is_valid_each_round_and_complete_after_follow_up(group):
    ppt, subs = group
    final_subs, final = follow_up(ppt, subs, CooperativeStickyAssignor().assign(ppt, subs))
    check_assignment("cooperative-sticky", ppt, final_subs, final, complete=True)


@SETTINGS
@given(groups())
def test_cooperative_withholds_exactly_the_partitions_changing_owner(group):
    """Round one = the sticky assignment minus the partitions that move away from a current owner."""
    ppt, subs = group
    first = CooperativeStickyAssignor().assign(ppt, subs)
    sticky = StickyAssignor().assign(ppt, subs)
    for m in subs:
        assert set(first[m]) <= set(sticky[m])
        withheld = set(sticky[m]) - set(first[m])
        for p in withheld:   # a withheld partition is one some *other* member claims as owned
            assert any(p in s.owned_partitions for o, s in subs.items() if o != m), (m, p)


@SETTINGS
@given(groups())
def test_range_is_balanced_per_topic(group):
    ppt, subs = group
    out = RangeAssignor().assign(ppt, subs)
    for topic in ppt:
        per = [sum(1 for tp in out[m] if tp.topic == topic) for m in subs if topic in subs[m].topics]
        if per:
            assert max(per) - min(per) <= 1


@SETTINGS
@given(groups(identical=True))
def test_identical_subscriptions_are_balanced_within_one(group):
    ppt, subs = group
    for assignor in (RoundRobinAssignor(), StickyAssignor()):
        c = counts(assignor.assign(ppt, subs))
        assert c[-1] - c[0] <= 1, (assignor.name, c)
    _, final = follow_up(ppt, subs, CooperativeStickyAssignor().assign(ppt, subs))
    c = counts(final)
    assert c[-1] - c[0] <= 1


@SETTINGS
@given(groups(identical=False))
def test_sticky_unequal_subscriptions_pass_kafkas_balance_check(group):
    ppt, subs = group
    kafka_balance_check(subs, StickyAssignor().assign(ppt, subs))
    _, final = follow_up(ppt, subs, CooperativeStickyAssignor().assign(ppt, subs))
    kafka_balance_check(subs, final)


@SETTINGS
@given(groups(identical=True, with_history=False), st.data())
def test_after_a_member_leaves_survivors_keep_everything(group, data):
    ppt, subs = group
    first = StickyAssignor().assign(ppt, subs)
    leaver = data.draw(st.sampled_from(sorted(subs)))
    survivors = {m: s._replace(owned_partitions=first[m], generation_id=1) for m, s in subs.items() if m != leaver}
    if not survivors:
        return
    for assignor in (StickyAssignor(), CooperativeStickyAssignor()):
        second = assignor.assign(ppt, survivors)
        for m in survivors:
            assert set(first[m]) <= set(second[m]), (assignor.name, m, first, second)
    # nothing moves between survivors, so cooperative-sticky withholds nothing
    assert CooperativeStickyAssignor().assign(ppt, survivors) == StickyAssignor().assign(ppt, survivors)


@SETTINGS
@given(groups(with_history=False))
def test_sticky_rerun_on_its_own_output_changes_nothing(group):
    ppt, subs = group
    for assignor in (StickyAssignor(), CooperativeStickyAssignor()):
        first = assignor.assign(ppt, subs)
        again = {m: s._replace(owned_partitions=first[m], generation_id=5) for m, s in subs.items()}
        assert assignor.assign(ppt, again) == first


@SETTINGS
@given(groups())
def test_assignors_are_pure_and_deterministic(group):
    ppt, subs = group
    before = copy.deepcopy((ppt, subs))
    for name in ALL:
        a = get_assignor(name).assign(ppt, subs)
        assert get_assignor(name).assign(dict(ppt), dict(subs)) == a
        assert all(v == sorted(v) for v in a.values())
        assert list(a) == list(subs) or set(a) == set(subs)
    assert (ppt, subs) == before


def no_two_way_moves(before, after):
    """Kafka's isSticky(): within a topic, partitions never move A->B and B->A in one rebalance."""
    old = {tp: m for m, tps in before.items() for tp in tps}
    pairs: dict[str, set] = {}
    for m, tps in after.items():
        for tp in tps:
            o = old.get(tp)
            if o is not None and o != m:
                pairs.setdefault(tp.topic, set()).add((o, m))
    for topic, ps in pairs.items():
        assert not any((b, a) in ps for a, b in ps), (topic, ps)


@SETTINGS
@given(groups(with_history=False), st.data())
def test_testReassignmentWithRandomSubscriptionsAndChanges(group, data):
    """AbstractStickyAssignorTest's random test: new random subscriptions, previous ownership kept;
    the result is valid, passes Kafka's balance check and has no two-way moves (isSticky)."""
    ppt, subs = group
    first = StickyAssignor().assign(ppt, subs)
    topics = sorted(ppt)
    changed = {m: s._replace(topics=data.draw(st.lists(st.sampled_from(topics), min_size=1, unique=True)),
                             owned_partitions=first[m], generation_id=1) for m, s in subs.items()}
    second = StickyAssignor().assign(ppt, changed)
    check_assignment("sticky", ppt, changed, second, complete=True)
    kafka_balance_check(changed, second)
    no_two_way_moves(first, second)
    _, final = follow_up(ppt, changed, CooperativeStickyAssignor().assign(ppt, changed))
    check_assignment("cooperative-sticky", ppt, changed, final, complete=True)
