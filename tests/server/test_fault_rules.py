"""The fault model (kafkasim.faults): matching, lifetimes, seeded probability and latency, and
bad rules refused naming the field."""

from __future__ import annotations

import pytest

from kafkasim.clock import MockClock
from kafkasim.errors import InvalidArgumentError, NotLeaderOrFollowerError
from kafkasim.faults import Faults, error_code_named


def test_kafka_error_names_and_codes():
    assert error_code_named("NOT_LEADER_OR_FOLLOWER") == (6, "NOT_LEADER_OR_FOLLOWER")
    assert error_code_named("kafka_storage_error") == (56, "KAFKA_STORAGE_ERROR")
    assert error_code_named(6) == error_code_named("6") == (NotLeaderOrFollowerError.errno, "NOT_LEADER_OR_FOLLOWER")
    for bad in ("NOT_A_KAFKA_ERROR", 0, "NONE", 9999, True):
        with pytest.raises(InvalidArgumentError, match="error"):
            error_code_named(bad)


def test_a_partition_rule_errors_that_partition_of_the_next_n_matching_requests_only():
    f = Faults(MockClock(0), known_apis={"Produce", "Fetch"})
    assert f.decide(0, "Produce", "c", [("t", 0)]) is None          # idle: nothing installed
    rule = f.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER", count=3, topic="t", partition=0)
    assert f.decide(0, "Fetch", "c", [("t", 0)]) is None
    assert f.decide(0, "Produce", "c", [("t", 1)]) is None          # another partition: no hit
    for _ in range(3):
        d = f.decide(0, "Produce", "c", [("t", 0), ("t", 1)])
        assert d.partition_errors == {("t", 0): 6} and d.error is None
    assert f.decide(0, "Produce", "c", [("t", 0)]) is None          # count used up
    [listed] = f.to_json()
    assert (listed["rule_id"], listed["hits"], listed["expired"]) == (rule.rule_id, 3, True)
    assert [e.action for e in f.events()] == ["error"] * 3


def test_request_rules_match_by_broker_and_client_and_expire_by_duration():
    clock = MockClock(1_000)
    f = Faults(clock, brokers=[0, 1, 2])
    f.add(broker=1, client_id="app", latency_ms=300, throttle_ms=50, duration_ms=10_000)
    assert f.decide(0, "Fetch", "app") is None
    assert f.decide(1, "Fetch", "other") is None
    d = f.decide(1, "Fetch", "app")
    assert (d.latency_ms, d.throttle_ms, d.drop, d.error) == (300, 50, None, None)
    clock.advance(10_000)
    assert f.decide(1, "Fetch", "app") is None


def test_probability_and_jitter_are_seeded():
    def run(seed):
        f = Faults(MockClock(0), seed=seed)
        f.add(api="Produce", drop="after", probability=0.3)
        f.add(api="Fetch", latency_ms=10, latency_jitter_ms=90)
        for i in range(200):
            f.decide(0, "Produce" if i % 2 else "Fetch", "c")
        return f.events()
    assert run(7) == run(7)
    assert run(7) != run(8)
    drops = [e for e in run(7) if e.action == "drop-after"]
    assert 15 <= len(drops) <= 45                                   # about 30% of 100
    assert all(10 <= e.latency_ms <= 100 for e in run(7) if e.action == "latency")


def test_remove_and_clear():
    f = Faults(MockClock(0))
    a = f.add(error="REQUEST_TIMED_OUT")
    f.add(drop="before")
    assert f.decide(0, "Metadata", None).drop == "before"
    f.remove(a.rule_id)
    assert [r.drop for r in f.rules()] == ["before"]
    assert f.clear() == 1 and f.decide(0, "Metadata", None) is None
    with pytest.raises(InvalidArgumentError, match="rule_id"):
        f.remove(a.rule_id)


@pytest.mark.parametrize("kwargs, field", [
    ({"api": "Nope", "error": 6}, "api"),
    ({"error": "NOPE"}, "error"),
    ({"drop": "during"}, "drop"),
    ({"error": 6, "drop": "after"}, "drop"),
    ({"error": 6, "count": 0}, "count"),
    ({"error": 6, "partition": -1}, "partition"),
    ({"error": 6, "broker": 7}, "broker"),
    ({"latency_ms": -5}, "latency_ms"),
    ({"error": 6, "probability": 0}, "probability"),
    ({"error": 6, "probability": 1.5}, "probability"),
    ({"error": 6, "topic": ""}, "topic"),
    ({"error": 6, "duration_ms": 0}, "duration_ms"),
    ({}, "must do something"),
])
def test_bad_rules_are_refused_naming_the_field_and_nothing_is_installed(kwargs, field):
    f = Faults(MockClock(0), known_apis={"Produce"}, brokers=[0, 1])
    with pytest.raises(InvalidArgumentError, match=field):
        f.add(**kwargs)
    assert f.rules() == [] and not f.active
