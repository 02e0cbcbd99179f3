"""The demo's cluster part: racks, replicated Zipf traffic, a group scaling out, a broker
failure with no acknowledged loss, and a reassignment after adding a broker.

:func:`run_cluster` on a fresh ``path`` with a MockClock and a seeded ``random.Random``:

1. a :class:`~kafkasim.broker.cluster.Cluster` of brokers 0, 1, 2 on racks ``r1``, ``r2``,
   ``r3``; topic ``payments`` with 6 partitions, replication factor 3 and
   ``min.insync.replicas=2`` (Kafka's placement over the racks);
2. one in-process producer with ``acks=all`` (idempotent) sends half the Zipf traffic, and
   kafka-python sends a tenth as much through ``kafkasim serve``'s listeners over the same
   cluster (:mod:`kafkasim.demo.wire`);
3. consumer group ``settlement`` (cooperative-sticky) starts with 2
   members, scales out to 3 and commits what it processed;
4. the other half is sent while the leader of partition 0 is stopped a third of the way in:
   leadership moves, the producer retries on the new leaders, and every acknowledged record
   (in-process and real client) is read back afterwards (``acked`` vs ``readable``: no
   acknowledged record lost); the
   broker restarts and catches up;
5. broker 3 joins on a new rack ``r4`` and holds nothing; :func:`kafkasim.placement.reassign.plan_reassignment`
   plans the balanced, fewest-moves target, the cluster executes it at a throttle (simulated
   time), then a preferred leader election; replicas per broker before and after, bytes
   moved, and every acknowledged record is read back again.

Returns the JSON-able summary of these steps (plus ``balance.png``'s data). Deterministic for
a seed. Not thread-safe: one run per path.
"""

from __future__ import annotations

import math
import random
from typing import Callable

from kafkasim.broker.cluster import Cluster
from kafkasim.clock import MockClock
from kafkasim.consumer import Consumer
from kafkasim.placement.reassign import plan_reassignment, replica_moves
from kafkasim.producer import Producer
from kafkasim.types import TopicPartition

from kafkasim.demo.traffic import (VALUE_DESERIALIZER, VALUE_SERIALIZER, Merchants, group_member, owned_text,
                                   produce, scale_out)
from kafkasim.demo.wire import send_through_serve

__all__ = ["run_cluster", "TOPIC", "BROKERS"]

TOPIC = "payments"
GROUP = "settlement"
BROKERS = [(0, "r1"), (1, "r2"), (2, "r3")]
NEW_BROKER = (3, "r4")
PARTITIONS = 6
THROTTLE = 1024 * 1024       # bytes/s of the reassignment's copy (simulated time)


def run_cluster(path: str, *, seed: int, records: int, start_ms: int,
                say: Callable[[str], None], progress) -> dict:
    """Steps 1–5 of the module docstring on a new cluster in ``path``; the summary of each."""
    clock = MockClock(start_ms)
    merchants = Merchants(random.Random(seed))
    out: dict = {"path": path, "topic": TOPIC, "records": records}
    with Cluster(path, brokers=BROKERS, clock=clock, seed=seed) as c:
        c.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3,
                       configs={"min.insync.replicas": "2"})
        placed = {tp.partition: r for tp, r in c.assignment().items()}
        out["placement"] = placed
        say(f"1. cluster of 3 brokers on racks r1, r2, r3 ({path}); topic {TOPIC}: {PARTITIONS} partitions, "
            "replication factor 3, min.insync.replicas 2; replicas (leader first): "
            + ", ".join(f"p{p}={_ids(r)}" for p, r in placed.items()))

        producer = Producer(c, client_id="checkout", clock=clock, seed=seed, acks="all",
                            value_serializer=VALUE_SERIALIZER)
        first = records // 2
        with progress.phase("cluster traffic", f"{first} records, acks=all"):
            futures = produce([producer], TOPIC, merchants, clock, first)
        say(f"2. an in-process producer (acks=all, idempotent) sent {first} Zipf-keyed payments to the cluster")
        wire_n = max(records // 10, 10)
        with progress.phase("real client", f"kafka-python, {wire_n} records through kafkasim serve"):
            wire, wire_acked = send_through_serve(c, TOPIC, merchants.keys(wire_n), clock, partitions=PARTITIONS)
        out["real_client"] = wire
        if "skipped" in wire:
            say(f"   real client: skipped ({wire['skipped']})")
        else:
            say(f"   kafka-python (acks=all) sent {wire['sent']} through kafkasim serve (one listener per broker "
                f"on 127.0.0.1): {wire['acked']} acknowledged, per partition {wire['per_partition']}; "
                f"{wire['not_murmur2']} outside the partition kafkasim's murmur2 gives their key")

        group = [group_member(c, clock, TOPIC, GROUP, "settle-a"),
                 group_member(c, clock, TOPIC, GROUP, "settle-b")]
        with progress.phase("cluster group", "2 members, then 3"):
            g = scale_out(group, lambda: group_member(c, clock, TOPIC, GROUP, "settle-c"), clock, TOPIC,
                          rounds=(10, 10))
        out["group"] = g
        say(f"3. group {GROUP} (cooperative-sticky) with 2 members, generation {g['generations'][0]}: "
            f"{owned_text(g['owners_before'])}; scaled out to 3, generation {g['generations'][1]}: "
            f"{owned_text(g['owners_after'])}; {g['consumed']} records processed and committed")
        for m in group:
            m.close()

        victim = c.leader_for(TOPIC, 0)
        stop_at = (records - first) // 3

        def fail(i: int) -> None:
            if i == stop_at:
                c.stop_broker(victim)

        with progress.phase("cluster failure", f"broker {victim} stops mid-traffic"):
            futures += produce([producer], TOPIC, merchants, clock, records - first, between=fail)
            producer.close()
            desc = c.describe_cluster()
            acked = [(m.partition, m.offset) for m in (f.value for f in futures if f.succeeded())]
            acked += wire_acked
            readable = _readable(c, clock)
        lost = sum(1 for m in acked if m not in readable)
        moved = [p["partition"] for p in desc["partitions"] if victim in p["replicas"]
                 and placed[p["partition"]][0] == victim]
        sent = len(futures) + wire.get("sent", 0)
        out["failure"] = {"stopped_broker": victim, "after_record": first + stop_at, "sent": sent,
                          "acked": len(acked), "failed": sent - len(acked), "readable": len(readable),
                          "acked_lost": lost, "under_replicated": desc["under_replicated"],
                          "offline": desc["offline"],
                          "new_leaders": {p: c.leader_for(TOPIC, p) for p in moved}}
        say(f"4. broker {victim} stopped after record {first + stop_at}: leadership of "
            + ", ".join(f"p{p}→{b}" for p, b in out["failure"]["new_leaders"].items())
            + f"; {desc['under_replicated']} partitions under-replicated, {desc['offline']} offline. "
            f"{len(acked)} of {sent} sends acknowledged (both clients), {len(readable)} records readable, "
            f"{lost} acknowledged records lost")
        c.start_broker(victim)
        for _ in range(5):
            clock.advance(1000)
            c.tick()
        out["failure"]["under_replicated_after_restart"] = c.describe_cluster()["under_replicated"]
        say(f"   broker {victim} restarted and caught up: "
            f"{out['failure']['under_replicated_after_restart']} partitions under-replicated")

        out["reassignment"] = _reassign(c, clock, acked, say, progress)
    return out


def _reassign(c: Cluster, clock: MockClock, acked: list, say, progress) -> dict:
    c.add_broker(*NEW_BROKER)
    before = _loads(c)
    current = c.assignment()
    brokers = {b["id"]: b["rack"] for b in c.describe_cluster()["brokers"]}
    with progress.phase("cluster reassignment", f"broker {NEW_BROKER[0]} joins"):
        plan = plan_reassignment(current, brokers)
        moves = replica_moves(current, plan)
        result = c.reassign(plan, throttle_bytes_per_s=THROTTLE)
        c.elect_leaders()
        done = c.verify(plan)
        readable = _readable(c, clock)
    after = _loads(c)
    lost = sum(1 for m in acked if m not in readable)
    rep = {"added_broker": NEW_BROKER[0], "replica_moves": moves, "bytes_moved": result["bytes_moved"],
           "copy_time_ms": result["time_ms"], "throttle_bytes_per_s": THROTTLE,
           "before": before, "after": after, "balanced": after["replicas_ratio"] is not None
           and max(after["replicas"].values()) - min(after["replicas"].values()) <= 1,
           "verified": done["complete"], "acked_lost": lost,
           "plan": {tp.partition: r for tp, r in sorted(plan.items())}}
    say(f"5. broker {NEW_BROKER[0]} joined rack {NEW_BROKER[1]} holding nothing: replicas per broker "
        f"{_counts(before['replicas'])} (max/min {_ratio_text(before['replicas_ratio'])}); "
        f"the plan moves {moves} replicas, {result['bytes_moved']:,} bytes copied in "
        f"{result['time_ms'] / 1000:.2f} s of simulated time at {THROTTLE // (1024 * 1024)} MiB/s; after: "
        f"{_counts(after['replicas'])} (max/min {_ratio_text(after['replicas_ratio'])}), "
        f"leaders {_counts(after['leaders'])}; {lost} acknowledged records lost")
    return rep


def _readable(c: Cluster, clock: MockClock) -> set[tuple[int, int]]:
    """Every (partition, offset) a fresh consumer reads from the beginning up to the HW."""
    hw = {p["partition"]: p["high_watermark"] for p in c.describe_cluster()["partitions"]
          if p["topic"] == TOPIC}
    reader = Consumer(c, clock=clock, enable_auto_commit=False, client_id="auditor",
                      value_deserializer=VALUE_DESERIALIZER)
    tps = [TopicPartition(TOPIC, p) for p in sorted(hw)]
    reader.assign(tps)
    reader.seek_to_beginning(*tps)
    seen: set[tuple[int, int]] = set()
    for _ in range(100_000):
        if all(reader.position(tp) >= hw[tp.partition] for tp in tps):
            break
        for tp, recs in reader.poll(timeout_ms=0, max_records=5000).items():
            seen.update((tp.partition, r.offset) for r in recs)
    reader.close()
    return seen


def _loads(c: Cluster) -> dict:
    d = c.describe_cluster()
    reps = {b["id"]: b["replicas"] for b in d["brokers"]}
    leads = {b["id"]: b["leaders"] for b in d["brokers"]}
    return {"replicas": reps, "leaders": leads, "bytes": {b["id"]: b["bytes"] for b in d["brokers"]},
            "replicas_ratio": _finite(d["skew"]["replicas"]["ratio"]),
            "leaders_ratio": _finite(d["skew"]["leaders"]["ratio"])}


def _finite(x: float):
    return None if math.isinf(x) else round(x, 3)


def _ratio_text(x) -> str:
    return "infinite: a broker holds nothing" if x is None else f"{x:.2f}"


def _counts(per_broker: dict) -> str:
    return ", ".join(f"b{b} {n}" for b, n in sorted(per_broker.items()))


def _ids(replicas) -> str:
    return "[" + ",".join(str(b) for b in replicas) + "]"
