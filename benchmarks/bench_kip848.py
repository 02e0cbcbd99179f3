"""KIP-848 rebalance: 100 members join one group over 10 topics x 60 partitions, in process.

Figure (seconds, lower is better):

- ``kip848_rebalance_100_members_s``: the consumer protocol (server assignor ``uniform``)
  through the broker's ``consumer_group_heartbeat``: 100 members join with epoch 0, then
  heartbeat round after round with what they own, until every member is at the group's
  assignment epoch and owns exactly its target (ConsumerGroupDescribe) and the group is
  Stable.

Baseline, same run: the classic protocol with ``cooperative-sticky`` through the broker's
``join_group``/``sync_group`` (the leader runs the assignor on the 100 subscriptions)
until the group is Stable with every member synced. Both start from an empty group on a
fresh broker; time is the wall time of the protocol work (the MockClock steps over
``group.initial.rebalance.delay.ms`` without sleeping). Best of 3.

``python -m benchmarks kip848`` runs just this file.
"""

from __future__ import annotations

import time

from benchmarks.common import figure, scratch_dir
from kafkasim.assignors import CooperativeStickyAssignor, Subscription
from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from kafkasim.protocol.group import COMPLETE
from kafkasim.types import TopicPartition

__all__ = ["run"]

TOPICS, PARTITIONS, MEMBERS = 10, 60, 100


def _broker(path: str, clock: MockClock) -> Broker:
    b = Broker(path, clock=clock)
    for t in range(TOPICS):
        b.create_topic(f"topic-{t:02d}", PARTITIONS)
    return b


def _consumer_protocol(b: Broker) -> tuple[float, int]:
    """(seconds, heartbeat rounds) until every member is reconciled to the target."""
    names = tuple(f"topic-{t:02d}" for t in range(TOPICS))
    members = {f"member-{m:03d}": (0, {}) for m in range(MEMBERS)}     # id -> (epoch, owned)
    t0 = time.perf_counter()
    rounds = 0
    while True:
        rounds += 1
        for mid, (epoch, owned) in members.items():
            res = b.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(
                group_id="g", member_id=mid, member_epoch=epoch, rebalance_timeout_ms=300_000,
                subscribed_topic_names=names, server_assignor="uniform", topic_partitions=owned))
            members[mid] = (res.member_epoch, res.assignment if res.assignment is not None else owned)
        desc = b.consumer_group_describe(["g"])[0]
        if desc["state"] == "Stable" and all(
                m["member_epoch"] == desc["assignment_epoch"] and m["assignment"] == m["target_assignment"]
                for m in desc["members"]):
            break
        if rounds > 50:
            raise RuntimeError(f"consumer group not reconciled after {rounds} rounds: {desc['state']}")
    elapsed = time.perf_counter() - t0
    owned = sum(len(ps) for m in desc["members"] for _, _, ps in m["assignment"])
    if owned != TOPICS * PARTITIONS or len(desc["members"]) != MEMBERS:
        raise RuntimeError(f"reconciled group owns {owned} partitions over {len(desc['members'])} members")
    return elapsed, rounds


def _classic(b: Broker, clock: MockClock) -> float:
    names = [f"topic-{t:02d}" for t in range(TOPICS)]
    protos = [("cooperative-sticky", {"topics": names, "user_data": None, "owned_partitions": [],
                                      "generation_id": -1, "rack_id": None})]
    kw = {"protocols": protos, "session_timeout_ms": 45_000, "rebalance_timeout_ms": 300_000}
    t0 = time.perf_counter()
    ids = [b.join_group("g", "", client_id=f"member-{m:03d}", **kw).member_id for m in range(MEMBERS)]
    clock.advance(3_000)                                  # group.initial.rebalance.delay.ms
    joined = [b.join_group("g", mid, **kw) for mid in ids]
    while any(j.status != COMPLETE for j in joined):      # the last join completes the rest
        joined = [j if j.status == COMPLETE else b.join_group("g", j.member_id, **kw) for j in joined]
    leader = next(j for j in joined if j.is_leader)
    subs = {mid: Subscription(list(meta["topics"])) for mid, _, meta in leader.members}
    plan = CooperativeStickyAssignor().assign({n: PARTITIONS for n in names}, subs)
    b.sync_group("g", leader.member_id, leader.generation_id, {m: list(tps) for m, tps in plan.items()})
    got = {leader.member_id: plan[leader.member_id]}
    for j in joined:
        if j.member_id != leader.member_id:
            res = b.sync_group("g", j.member_id, j.generation_id, None)
            got[j.member_id] = [TopicPartition(*tp) for tp in res.assignment]
    elapsed = time.perf_counter() - t0
    state = b.describe_group("g")["state"]
    if state != "Stable" or sum(len(v) for v in got.values()) != TOPICS * PARTITIONS:
        raise RuntimeError(f"classic group {state} with {sum(len(v) for v in got.values())} partitions")
    return elapsed


def run() -> dict:
    kip848, classic, rounds = float("inf"), float("inf"), 0
    for _ in range(3):
        with scratch_dir() as d:
            clock = MockClock(1_700_000_000_000)
            b = _broker(f"{d}/k", clock)
            try:
                s, rounds = _consumer_protocol(b)
                kip848 = min(kip848, s)
            finally:
                b.close()
            b = _broker(f"{d}/c", clock)
            try:
                classic = min(classic, _classic(b, clock))
            finally:
                b.close()
    return {"kip848_rebalance_100_members_s": figure(
        kip848, "s", classic, f"classic cooperative-sticky join/sync to Stable, same group "
        f"(consumer protocol took {rounds} heartbeat rounds)", higher_is_better=False)}
