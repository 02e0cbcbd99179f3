"""The KIP-848 labs: rebalance-protocols' consumer-protocol column and broker-side-assignment.

Each runs on a real broker in tmp_path with in-process consumers of Kafka 4's consumer
group protocol. The tests name what the lab text promises: the consumer protocol pauses
less than cooperative on a rolling restart of dynamic members, with fewer round trips and
two group epochs per restarted member; a short restart or static membership removes the
effect (ClaimFailedError, with the lab's explanation); uniform evens the totals where range
splits topic by topic (partition i of every topic to the same member); a regex member gets a
new topic's partitions through its heartbeats without a rejoin or a lost partition.
Determinism of both labs is checked by ``test_scenarios.py``'s parametrised contract test.
"""

from __future__ import annotations

import pytest

from kafkasim.errors import ClaimFailedError, InvalidArgumentError
from kafkasim.scenarios import SCENARIOS, list_scenarios, run_scenario

RESTART_SMALL = {"trials": 2}
ONE = {"trials": 1}


def _run(name, tmp_path, **params):
    lines = []
    result = run_scenario(name, str(tmp_path / name), echo=lines.append, **params)
    return result, lines


@pytest.fixture(scope="module")
def protocols(tmp_path_factory):
    return _run("rebalance-protocols", tmp_path_factory.mktemp("rp"), **RESTART_SMALL)


@pytest.fixture(scope="module")
def assignment(tmp_path_factory):
    return _run("broker-side-assignment", tmp_path_factory.mktemp("bsa"))


# ---------------------------------------------------------------------- rebalance-protocols

def test_the_consumer_protocol_is_a_third_column_for_three_events(protocols):
    r, _ = protocols
    assert list(r["events"]) == ["join", "crash", "rolling-restart"]
    for event in r["events"].values():
        assert [s["protocol"] for s in event.values()] == ["eager", "cooperative", "consumer"]
        assert event["uniform"]["assignor"] == "uniform"


def test_rolling_restart_consumer_protocol_pauses_less_than_cooperative_in_fewer_round_trips(protocols):
    r, lines = protocols
    restart = r["events"]["rolling-restart"]
    coop, kip848 = restart["cooperative-sticky"], restart["uniform"]
    assert kip848["mean_paused_partition_seconds"] < coop["mean_paused_partition_seconds"]
    assert kip848["mean_round_trips"] < coop["mean_round_trips"]
    members = 6
    for t in kip848["trials"]:
        # a dynamic restart is a leave and a join: two group epochs per member, no barrier
        assert t["rebalance_rounds"] == 2 * members
        assert sorted(p for ps in t["after"].values() for p in ps) == list(range(r["partitions"]))
        assert sorted(t["after"]) == [f"c{i}" for i in range(members)]
    for t in coop["trials"]:
        # classic: every member takes part in every round (a JoinGroup+SyncGroup each)
        assert t["round_trips"] >= t["rebalance_rounds"] * (members - 1)
    assert any(line.startswith("Mean: the consumer protocol") for line in lines)


def test_a_join_costs_the_consumer_protocol_one_round_trip_per_changed_member(protocols):
    r, _ = protocols
    for t in r["events"]["join"]["uniform"]["trials"]:
        changed = {c for c, ps in t["after"].items() if ps != t["before"].get(c)}
        assert t["round_trips"] == len(changed) and t["rebalance_rounds"] == 1


def test_a_short_restart_lets_cooperative_win_and_the_lab_says_why(tmp_path):
    with pytest.raises(ClaimFailedError, match="rolling-restart: consumer protocol"):
        _run("rebalance-protocols", tmp_path, restart_ms=5000, **ONE)
    lines = []
    try:
        run_scenario("rebalance-protocols", str(tmp_path / "again"), echo=lines.append,
                     restart_ms=5000, **ONE)
    except ClaimFailedError:
        pass
    assert any("JoinGroup barrier" in line and "rolling-restart trial 0" in line for line in lines)


def test_static_members_restarted_within_the_session_timeout_pause_alike_under_every_protocol(tmp_path):
    lines = []
    with pytest.raises(ClaimFailedError, match="rolling-restart"):
        run_scenario("rebalance-protocols", str(tmp_path / "s"), echo=lines.append,
                     static=True, restart_ms=5000, **ONE)
    assert any("without a rebalance under every protocol" in line for line in lines)


def test_a_rolling_restart_of_one_member_is_refused_naming_it(tmp_path):
    with pytest.raises(InvalidArgumentError, match="restart_members=1"):
        _run("rebalance-protocols", tmp_path, restart_members=1, **ONE)


# ---------------------------------------------------------------------- broker-side-assignment

def test_broker_side_assignment_is_registered_right_after_rebalance_protocols():
    names = list(SCENARIOS)
    assert names.index("broker-side-assignment") == names.index("rebalance-protocols") + 1
    numbers = {r["name"]: r["number"] for r in list_scenarios()}
    assert numbers["broker-side-assignment"] == numbers["rebalance-protocols"] + 1


def test_uniform_evens_the_totals_range_splits_topic_by_topic(assignment):
    r, lines = assignment
    same = r["assignments"]["same"]
    uniform, rng = same["uniform"], same["range"]
    assert uniform["protocol"] == "uniform" and rng["protocol"] == "range"
    assert sorted(uniform["per_member"].values()) == [3, 3, 3, 3] and uniform["spread"] == 0
    assert sorted(rng["per_member"].values()) == [2, 3, 3, 4] and rng["spread"] == 2
    for owned in (uniform["assignment"], rng["assignment"]):
        for topic, n in r["topics"].items():
            assert sorted(p for by in owned.values() for p in by[topic]) == list(range(n))
    # range: one contiguous range per member and topic, dealt in one member order: the same
    # member starts every topic (with equal counts, partition i of each topic: co-partitioning)
    order = None
    for topic in sorted(r["topics"], key=r["topics"].get, reverse=True):   # the widest first
        ranges = {m: by[topic] for m, by in rng["assignment"].items() if by[topic]}
        assert all(ps == list(range(ps[0], ps[-1] + 1)) for ps in ranges.values())
        by_start = sorted(ranges, key=lambda m: ranges[m][0])
        order = order or by_start
        assert by_start == [m for m in order if m in ranges]
    assert any(line.startswith("range: spread 2") for line in lines)


def test_different_subscriptions_get_only_their_topics(assignment):
    r, _ = assignment
    for a in ("uniform", "range"):
        g = r["assignments"]["different"][a]
        for member, by in g["assignment"].items():
            assert {t for t, ps in by.items() if ps} <= set(g["subscriptions"][member])
        for topic, n in r["topics"].items():
            assert sorted(p for by in g["assignment"].values() for p in by[topic]) == list(range(n))


def test_a_regex_member_gets_a_new_topic_by_heartbeat_without_rejoin_or_loss(assignment):
    r, lines = assignment
    x = r["regex"]
    before, after = x["before"], x["after"]
    assert after["group_epoch"] == before["group_epoch"] + 1
    assert all(after["member_epochs"][n] == before["member_epochs"][n] + 1 for n in before["member_epochs"])
    assert after["member_ids"] == before["member_ids"]                     # no rejoin
    assert x["partitions_lost"] == {n: [] for n in before["member_ids"]}   # nothing revoked or lost
    for n, owned in before["owned"].items():
        assert set(owned) <= set(after["owned"][n])                        # only gains
    assert x["new_topic_partitions_owned"] == sorted(f"orders-us-{p}" for p in range(6))
    hb = x["heartbeat_interval_ms"]
    assert all(0 < ms <= hb for ms in x["received_after_ms"].values())     # each member's next heartbeat
    assert len(set(x["received_after_ms"].values())) > 1                   # members heartbeat apart
    assert any("partitions revoked or lost after the creation: none" in line for line in lines)


def test_equal_partition_counts_break_the_assignment_claim(tmp_path):
    with pytest.raises(ClaimFailedError, match="uniform spread 0, range spread 0"):
        _run("broker-side-assignment", tmp_path, partitions=[4, 4, 4])


@pytest.mark.parametrize("params, named", [
    ({"partitions": [3, 4]}, r"partitions=\[3, 4\]"),
    ({"new_partitions": 2}, "new_partitions=2"),
    ({"heartbeat_interval_ms": 50}, "heartbeat_interval_ms=50"),
])
def test_bad_params_are_refused_naming_them(tmp_path, params, named):
    with pytest.raises(InvalidArgumentError, match=named):
        _run("broker-side-assignment", tmp_path, **params)
