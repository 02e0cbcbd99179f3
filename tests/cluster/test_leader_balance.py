"""Automatic preferred leader election (``auto.leader.rebalance.enable``), on the MockClock.

Kafka 4's KRaft controller (``QuorumController.maybeScheduleNextBalancePartitionLeaders``,
``ReplicationControlManager.maybeBalancePartitionLeaders``): once a partition is led by a
replica other than its first, a check is due ``leader.imbalance.check.interval.seconds``
later; it elects the preferred replica of every such partition where that replica is live
and in the ISR, and is scheduled again while an imbalance remains.
"""

from __future__ import annotations

import pytest

from kafkasim.broker.cluster import Cluster
from kafkasim.errors import InvalidConfigurationError
from kafkasim.records.record_batch import encode_batch
from kafkasim.types import TopicPartition

from tests.cluster.conftest import RACKS3

S = 1000                     # one second, in ms


def _leaders(c: Cluster, topic: str = "t") -> dict[int, int]:
    return {tp.partition: c.leader_for(tp.topic, tp.partition) for tp in c.assignment() if tp.topic == topic}


def _preferred(c: Cluster, topic: str = "t") -> dict[int, int]:
    return {tp.partition: replicas[0] for tp, replicas in c.assignment().items() if tp.topic == topic}


def _epochs(c: Cluster, topic: str = "t") -> dict[int, int]:
    return {p["partition"]: p["leader_epoch"] for p in c.describe_cluster()["partitions"] if p["topic"] == topic}


def _all_led_by_0(c: Cluster, clock) -> None:
    """Stop brokers 1 and 2 (broker 0 leads every partition), then start them again."""
    c.stop_broker(1)
    c.stop_broker(2)
    assert set(_leaders(c).values()) == {0}
    clock.advance(S)
    c.start_broker(1)
    c.start_broker(2)
    assert set(_leaders(c).values()) == {0}
    assert all(len(p["isr"]) == 3 for p in c.describe_cluster()["partitions"])   # caught up, in the ISR


def test_after_a_restart_and_the_check_interval_the_preferred_replicas_lead_again(tmp_path, clock):
    c = Cluster(tmp_path / "d", RACKS3, clock=clock, seed=7)       # Kafka's defaults: on, every 300 s
    try:
        c.create_topic("t", 6, 3)
        preferred = _preferred(c)
        assert sorted(preferred.values()) == [0, 0, 1, 1, 2, 2]
        assert _leaders(c) == preferred
        t0 = clock.now_ms()
        _all_led_by_0(c, clock)                 # the imbalance appears at t0: the check is due at t0 + 300 s
        assert c.metrics()["PreferredReplicaImbalanceCount"] == 4
        balance = c.leader_balance()
        assert balance["enabled"] and balance["next_check_ms"] == t0 + 300 * S
        assert balance["imbalanced"] == sorted(f"t-{p}" for p, b in preferred.items() if b != 0)
        epochs = _epochs(c)

        clock.set(t0 + 300 * S - 1)
        c.tick()
        assert set(_leaders(c).values()) == {0}        # before the interval nothing moves
        assert _epochs(c) == epochs

        clock.set(t0 + 300 * S)
        c.tick()
        assert _leaders(c) == preferred
        moved = {p for p, b in preferred.items() if b != 0}
        assert _epochs(c) == {p: e + (p in moved) for p, e in epochs.items()}    # an election: epoch + 1
        d = c.describe_cluster()
        assert [b["leaders"] for b in d["brokers"]] == [2, 2, 2]
        assert d["preferred_replica_imbalance"] == 0
        assert c.metrics()["PreferredReplicaImbalanceCount"] == 0
        assert c.leader_balance()["next_check_ms"] is None          # balanced: nothing scheduled
    finally:
        c.close()


def test_the_check_repeats_every_interval_while_an_imbalance_remains(tmp_path, clock):
    c = Cluster(tmp_path / "d", RACKS3, clock=clock, seed=7,
                broker_configs={"leader.imbalance.check.interval.seconds": "30"})
    try:
        c.create_topic("t", 6, 3)
        preferred = _preferred(c)
        t0 = clock.now_ms()
        c.stop_broker(1)
        c.stop_broker(2)
        clock.set(t0 + 30 * S)
        c.tick()                                # the brokers are still down: nothing can move
        assert set(_leaders(c).values()) == {0}
        clock.set(t0 + 45 * S)
        c.start_broker(1)
        c.start_broker(2)
        c.tick()
        assert set(_leaders(c).values()) == {0}
        clock.set(t0 + 60 * S - 1)
        c.tick()
        assert set(_leaders(c).values()) == {0}
        clock.set(t0 + 60 * S)                  # the next check, one interval after the last
        c.tick()
        assert _leaders(c) == preferred
    finally:
        c.close()


def test_with_auto_leader_rebalance_disabled_nothing_moves(tmp_path, clock):
    c = Cluster(tmp_path / "d", RACKS3, clock=clock, seed=7,
                broker_configs={"auto.leader.rebalance.enable": "false"})
    try:
        assert c.broker_config["auto.leader.rebalance.enable"] is False
        c.create_topic("t", 6, 3)
        _all_led_by_0(c, clock)
        for _ in range(3):
            clock.advance(300 * S)
            c.tick()
        assert set(_leaders(c).values()) == {0}
        assert c.elect_leaders()                # an operator's election still works
        assert _leaders(c) == _preferred(c)
    finally:
        c.close()


@pytest.mark.parametrize("percentage", [None, "10", "50"])
def test_the_per_broker_percentage_is_not_a_threshold_as_in_kraft(tmp_path, clock, percentage):
    """Broker 0 is the preferred replica of 10 partitions and 1 of them is led elsewhere: a
    10 % imbalance. Kafka's ZooKeeper controller elected only above the percentage
    (1/10 > 10/100 is false: nothing would move); the KRaft controller of Kafka 4 ignores
    ``leader.imbalance.per.broker.percentage`` and moves every imbalanced partition."""
    configs = {"leader.imbalance.check.interval.seconds": 60}
    if percentage is not None:
        configs["leader.imbalance.per.broker.percentage"] = percentage
    c = Cluster(tmp_path / "d", RACKS3, clock=clock, seed=7, broker_configs=configs)
    try:
        c.create_topic("u", 30, 3)
        preferred = _preferred(c, "u")
        mine = sorted(p for p, b in preferred.items() if b == 0)
        assert len(mine) == 10
        c.stop_broker(0)
        t0 = clock.now_ms()
        c.start_broker(0)
        assert c.elect_leaders([TopicPartition("u", p) for p in mine[1:]])    # all but one back
        leaders = _leaders(c, "u")
        assert [p for p in mine if leaders[p] != 0] == [mine[0]]             # 1 of 10: 10 %
        clock.set(t0 + 60 * S - 1)
        c.tick()
        assert _leaders(c, "u")[mine[0]] != 0
        clock.set(t0 + 60 * S)
        c.tick()
        assert _leaders(c, "u") == preferred
    finally:
        c.close()


def test_a_preferred_replica_out_of_the_isr_is_not_elected(tmp_path, clock):
    c = Cluster(tmp_path / "d", RACKS3, clock=clock, seed=7,
                broker_configs={"leader.imbalance.check.interval.seconds": 60})
    try:
        c.create_topic("t", 6, 3)
        preferred = _preferred(c)
        t0 = clock.now_ms()
        c.stop_broker(1)                        # its 2 partitions move; the check is due at t0 + 60 s
        c.slow(1, 600 * S)
        c.start_broker(1)                       # it fetches once on return, then every 10 min
        for p in range(6):
            c.produce("t", p, encode_batch(0, [(0, 1000, b"k", b"v", ())]), acks=1)
        clock.set(t0 + 31 * S)                  # behind for more than replica.lag.time.max.ms
        c.tick()
        isr = {p["partition"]: p["isr"] for p in c.describe_cluster()["partitions"]}
        assert all(1 not in members for members in isr.values())
        epochs = _epochs(c)

        clock.set(t0 + 60 * S)
        c.tick()                                # live but not in the ISR: not elected
        assert all(_leaders(c)[p] != 1 for p in preferred if preferred[p] == 1)
        assert _epochs(c) == epochs

        c.slow(1, 0)                            # it catches up and rejoins the ISR
        clock.set(t0 + 61 * S)
        c.tick()
        assert all(1 in p["isr"] for p in c.describe_cluster()["partitions"])
        clock.set(t0 + 120 * S - 1)
        c.tick()
        assert all(_leaders(c)[p] != 1 for p in preferred if preferred[p] == 1)
        clock.set(t0 + 120 * S)                 # the next check
        c.tick()
        assert _leaders(c) == preferred
    finally:
        c.close()


def test_a_reopened_cluster_checks_one_interval_after_it_opens(tmp_path, clock):
    """Each ``kafkasim cluster`` command is its own controller: the schedule starts on open."""
    d = tmp_path / "d"
    with Cluster(d, RACKS3, clock=clock, seed=7, broker_configs={"leader.imbalance.check.interval.seconds": 10}) as c:
        c.create_topic("t", 6, 3)
        preferred = _preferred(c)
        c.stop_broker(1)
        c.start_broker(1)
    clock.advance(3600 * S)
    with Cluster(d, clock=clock, broker_configs={"leader.imbalance.check.interval.seconds": 10}) as c:
        t1 = clock.now_ms()
        c.tick()
        assert _leaders(c) != preferred
        clock.set(t1 + 10 * S)
        c.tick()
        assert _leaders(c) == preferred


@pytest.mark.parametrize("name, value, why", [
    ("leader.imbalance.check.interval.seconds", 0, "Value must be at least 1"),
    ("leader.imbalance.check.interval.seconds", "soon", "Expected value to be a 64-bit integer"),
    ("auto.leader.rebalance.enable", "yes", "Expected value to be either true or false"),
    ("leader.imbalance.per.broker.percentage", "ten", "Expected value to be a 32-bit integer"),
])
def test_bad_values_are_refused_naming_the_value(tmp_path, clock, name, value, why):
    with pytest.raises(InvalidConfigurationError, match=f"Invalid value {value!r} for configuration {name}: {why}"):
        Cluster(tmp_path / "d", RACKS3, clock=clock, broker_configs={name: value})
    assert not (tmp_path / "d").exists()


def test_kafkas_defaults(tmp_path, clock):
    with Cluster(tmp_path / "d", RACKS3, clock=clock) as c:
        assert c.broker_config["auto.leader.rebalance.enable"] is True
        assert c.broker_config["leader.imbalance.check.interval.seconds"] == 300
        assert c.broker_config["leader.imbalance.per.broker.percentage"] == 10
