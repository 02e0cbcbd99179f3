"""A seeded, randomised fault schedule on an in-process cluster and a MockClock: broker stop and
start, isolation (clients, followers, both), disk full and clear, slowed followers, and request
rules (``cluster.faults.add``) applied through ``Faults.decide`` to the produce and fetch calls a
client makes. The same seed gives the same event logs, another seed other logs, and whatever the
schedule, nothing acknowledged with acks=all is lost once every fault is lifted."""

from __future__ import annotations

import random

import pytest

from kafkasim.broker.cluster import Cluster
from kafkasim.broker.faults import ISOLATE_FROM
from kafkasim.clock import MockClock
from kafkasim.errors import BrokerResponseError, InvalidArgumentError
from kafkasim.records.record_batch import encode_batch

from tests.cluster.conftest import RACKS3, records_of

TOPIC = "t"
_ERRORS = ["NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT", "NOT_ENOUGH_REPLICAS", "KAFKA_STORAGE_ERROR"]


def _batch(keys) -> bytes:
    return encode_batch(0, [(i, 1000, k, b"v", ()) for i, k in enumerate(keys)])


def _random_rule(rng: random.Random) -> dict:
    rule = {"api": rng.choice(["Produce", "Fetch"]), "count": rng.randint(1, 3),
            "probability": rng.choice([1.0, 0.5]), "partition": rng.choice([None, 0, 1, 2]),
            "broker": rng.choice([None, 0, 1, 2])}
    action = rng.randrange(3)
    if action == 0:
        rule["error"] = rng.choice(_ERRORS)
    elif action == 1:
        rule.update(latency_ms=rng.choice([50, 300]), latency_jitter_ms=rng.choice([0, 100]))
    else:
        rule["drop"] = rng.choice(["before", "after"])
    return rule


def _client_call(c: Cluster, clock: MockClock, rng: random.Random, n: int, acked: dict) -> tuple:
    """One produce or fetch as a client makes it: to the leader, through the request rules."""
    p = rng.randrange(3)
    leader = c.leader_for(TOPIC, p)
    if leader < 0:
        return ("offline", p)
    api = "Produce" if rng.random() < 0.7 else "Fetch"
    decision = c.faults.requests.decide(leader, api, "client-1", [(TOPIC, p)])
    if decision is not None:
        clock.advance(decision.latency_ms)
        if decision.drop == "before":
            return (api, p, "dropped before")
        if decision.error is not None or decision.partition_errors:
            return (api, p, "error", decision.error, sorted(decision.partition_errors.items()))
    node = c.node(leader)
    try:
        if api == "Fetch":
            res = node.fetch(TOPIC, p, 0)
            out = (api, p, len(res.records), res.high_watermark)
        else:
            key = b"k%d" % n
            res = node.produce(TOPIC, p, _batch([key]), acks="all")
            if decision is None or decision.drop is None:     # a post-apply drop: no answer
                acked[key] = (p, res.base_offset)
            out = (api, p, res.base_offset)
    except BrokerResponseError as exc:
        out = (api, p, type(exc).__name__)
    return out if decision is None or decision.drop is None else (*out, "dropped after")


def _run(path, seed: int, steps: int = 200) -> dict:
    rng = random.Random(seed)
    clock = MockClock(1_700_000_000_000)
    c = Cluster(path, RACKS3, clock=clock, seed=seed)
    c.create_topic(TOPIC, 3, 3, {"min.insync.replicas": "2"})
    outcomes: list[tuple] = []
    acked: dict[bytes, tuple[int, int]] = {}
    try:
        for n in range(steps):
            infos = c.brokers
            alive = [b for b, i in infos.items() if i.state == "alive"]
            whole = [b for b in alive if not infos[b].isolated_from and not infos[b].log_dir_offline]
            stopped = [b for b, i in infos.items() if i.state == "stopped"]
            cut_off = [b for b, i in infos.items() if i.state == "isolated" or i.isolated_from]
            full = [b for b, i in infos.items() if i.disk_full]
            failed = [b for b in alive if infos[b].log_dir_offline and not infos[b].disk_full]
            op = rng.random()
            try:
                if op < 0.05 and len(whole) > 1:
                    c.faults.stop(rng.choice(whole))
                elif op < 0.12 and stopped:
                    c.faults.start(rng.choice(stopped))
                elif op < 0.17 and len(whole) > 1:
                    c.faults.isolate(rng.choice(whole), rng.choice(ISOLATE_FROM))
                elif op < 0.24 and cut_off:
                    c.faults.heal(rng.choice(cut_off))
                elif op < 0.27 and not full and len(whole) > 1:
                    c.faults.fill_disk(rng.choice(whole))
                elif op < 0.32 and full:
                    c.faults.clear_disk(rng.choice(full))
                elif op < 0.35 and failed:                 # the restart that brings a log dir back
                    b = rng.choice(failed)
                    c.faults.stop(b)
                    c.faults.start(b)
                elif op < 0.37:
                    c.faults.slow(rng.randrange(3), rng.choice([0, 0, 5_000]))
                elif op < 0.39:
                    c.faults.start(rng.randrange(3))       # refused unless stopped: logged as refused
                elif op < 0.49:
                    outcomes.append(("rule", c.faults.add(**_random_rule(rng)).rule_id))
                elif op < 0.57:
                    clock.advance(rng.randint(0, 40_000))
                    c.tick()
                else:
                    outcomes.append(_client_call(c, clock, rng, n, acked))
            except InvalidArgumentError as exc:
                outcomes.append(("refused", str(exc)))
        rules = c.faults.to_json()["rules"]
        # lift every fault: disks cleared, brokers restarted, isolations healed
        c.faults.clear()
        for b, info in c.brokers.items():
            c.faults.slow(b, 0)
            if info.disk_full:
                c.faults.clear_disk(b)
            if info.state == "isolated" or info.isolated_from:
                c.faults.heal(b)
            if c.brokers[b].state == "stopped":
                c.faults.start(b)
            elif info.log_dir_offline:
                c.faults.stop(b)
                c.faults.start(b)
        clock.advance(1)
        c.tick()
        logs = {p: records_of(c._partitions[(TOPIC, p)].log) for p in range(3)}
        return {"broker_events": [e.to_json() for e in c.faults.events()],
                "request_events": c.faults.requests.events(), "outcomes": outcomes,
                "rules": rules, "describe": c.describe_cluster(), "logs": logs,
                "acked": acked}
    finally:
        c.close()


def test_one_seed_gives_one_event_log_and_another_seed_another(tmp_path):
    first = _run(tmp_path / "a", seed=11)
    again = _run(tmp_path / "b", seed=11)
    other = _run(tmp_path / "c", seed=12)
    assert first == again
    assert first["broker_events"] != other["broker_events"]
    assert first["request_events"] != other["request_events"]
    kinds = {e["kind"] for e in first["broker_events"]}
    assert {"stop", "start", "isolate", "heal", "fill-disk", "clear-disk", "log-dir-offline",
            "log-dir-online"} <= kinds, kinds
    actions = {e.action for e in first["request_events"]}
    assert {"error", "latency", "drop-before", "drop-after"} <= actions, actions
    assert {e["detail"] for e in first["broker_events"] if e["kind"] == "isolate"} >= {"clients", "followers"}


@pytest.mark.parametrize("seed", [pytest.param(s, marks=pytest.mark.slow) if s >= 4 else s for s in range(12)])
def test_no_acknowledged_record_is_lost_whatever_the_schedule(tmp_path, seed):
    run = _run(tmp_path / "d", seed=seed)
    assert run["acked"], "the schedule acknowledged nothing"
    for key, (p, offset) in run["acked"].items():
        assert (offset, key) in run["logs"][p], f"acknowledged {key!r} at {p}/{offset} is lost"
    for part in run["describe"]["partitions"]:
        assert sorted(part["isr"]) == [0, 1, 2] and part["leader"] >= 0
    assert all(not b["disk_full"] and not b["log_dir_offline"] and b["state"] == "alive"
               for b in run["describe"]["brokers"])

