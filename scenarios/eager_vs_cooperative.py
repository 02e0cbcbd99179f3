"""Lab: eager vs cooperative rebalancing — what a scale-out from 3 to 4 consumers costs.

What you will see
-----------------
A group of 3 consumers reads a topic (default 6 partitions) and is Stable; each
member loops ``poll → process the batch → commit``, one of them (c0) is a slow
consumer. A 4th consumer joins. The same scale-out is run with an **eager**
assignor (``range`` by default, or ``sticky``) and with **cooperative-sticky**, for
``trials`` seeded timings each, and the lab reports:

- which partitions each member revoked (gave up) during the scale-out;
- **paused partition-seconds**: for every partition, the simulated time (MockClock)
  between being revoked and being assigned again, summed — the time nobody was
  reading it;
- the number of rebalance rounds (generations) the scale-out took.

Why
---
Eager protocol (Kafka's classic rebalance): a member learns of the rebalance from its
heartbeat thread (``REBALANCE_IN_PROGRESS``), and at its next ``poll()`` revokes
**all** its partitions and rejoins; the JoinGroup barrier then waits for every member,
so the partitions of the members that rejoined early sit idle until the slowest member
finishes its batch and polls: a stop-the-world pause of every partition. Cooperative
protocol (KIP-429, incremental cooperative rebalancing): members keep their partitions
while rejoining; the first round only *takes away* the partitions that must move
(their owners revoke just those and rejoin at once), the second round gives them to
the new member. Two rounds instead of one, but only the moved partitions pause.
With ``sticky`` (eager) the final assignment is as sticky as cooperative's, yet every
partition still pauses: the protocol, not the assignor, decides the pause.

The trade-off is visible if you change the parameters: with ``slow_ms=0`` (every
member fast) the eager barrier is short, while the moved partition still waits for
the second round (others learn of it only at their next heartbeat, up to
``heartbeat_interval_ms``), so eager can pause *fewer* partition-seconds; cooperative
pays off when members are slow to reach ``poll()`` or own many partitions (and in
Kafka Streams, where a revoked task must also close and restore state).

Kafka references: KIP-429, ``ConsumerRebalanceListener``; Confluent blog "Incremental
Cooperative Rebalancing in Apache Kafka".

Run it: ``kafkasim scenario run eager_vs_cooperative``.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Optional

from kafkasim.clock import MockClock
from kafkasim.scenarios._common import START_MS, GroupDriver, OwnershipClock, fresh_broker, main_for, table

__all__ = ["PARAMS", "CLAIM", "run"]

CLAIM = ("When a member joins or crashes, cooperative-sticky pauses fewer partition-seconds than eager, because only the partitions that move stop.")
"""The lab's point, asserted by :func:`run`."""

PARAMS: dict[str, Any] = {
    "partitions": 6,
    "before": 3,                   # consumers before the scale-out
    "eager": "range",              # the eager assignor: range or sticky
    "heartbeat_interval_ms": 3000,  # Kafka's default: how soon members learn of a rebalance
    "process_ms": 1500,            # time each member spends processing one polled batch
    "jitter": 0.5,                 # ... varying by ± this fraction (seeded)
    "slow_ms": 8000,               # c0 is a slow consumer: this long per batch (0 = like the others)
    "max_poll_records": 20,
    "trials": 5,                   # scale-outs per protocol, each with its own seeded timings
}


def _scale_out(broker, clock: MockClock, assignor: str, trial: str, cfg: dict,
               rng: random.Random) -> dict:
    group = f"scale-{assignor}-{trial}"
    driver = GroupDriver(broker, clock, rng=rng)
    pauses = OwnershipClock(clock)
    member_cfg = dict(partition_assignment_strategy=[assignor], process_ms=cfg["process_ms"],
                      jitter=cfg["jitter"],
                      heartbeat_interval_ms=cfg["heartbeat_interval_ms"],
                      max_poll_records=cfg["max_poll_records"])
    for i in range(cfg["before"]):
        mc = dict(member_cfg)
        if i == 0 and cfg["slow_ms"]:
            mc["process_ms"] = cfg["slow_ms"]
        driver.add(f"c{i}", "events", group, listener=pauses.for_member(f"c{i}"), **mc)
    driver.run_until_stable(group)
    # let the group run a seeded while, so the join lands at an arbitrary heartbeat phase
    driver.run(2000 + 100 * rng.randrange(30))
    before = driver.assignments(group)
    gen0 = broker.describe_group(group)["generation"]
    pauses.counting = True
    new = f"c{cfg['before']}"
    driver.add(new, "events", group, listener=pauses.for_member(new), **member_cfg)
    took = driver.run_until_stable(group)
    driver.run(1000)
    after = driver.assignments(group)
    gen1 = broker.describe_group(group)["generation"]
    pauses.counting = False
    for m in driver.live(group):
        m.consumer.close()
        m.alive = False
    protocol = "cooperative" if assignor == "cooperative-sticky" else "eager"
    return {"assignor": assignor, "protocol": protocol, "before": before, "after": after,
            "revoked": {k: sorted(v) for k, v in sorted(pauses.revoked.items())},
            "revoked_count": sum(len(v) for v in pauses.revoked.values()),
            "paused_partition_seconds": round(pauses.paused_ms / 1000.0, 3),
            "rebalance_rounds": gen1 - gen0, "settle_ms": took,
            "generations": [gen0, gen1]}


def run(data_dir: str, *, seed: int = 42, echo: Callable[[str], Any] = print,
        plot_dir: Optional[str] = None, **params: Any) -> dict:
    """Run the lab (see the module docstring); return per-protocol trials and means."""
    cfg = {**PARAMS, **params}
    clock = MockClock(START_MS)
    assignors = (cfg["eager"], "cooperative-sticky")
    trials: dict[str, list[dict]] = {a: [] for a in assignors}
    with fresh_broker(data_dir, clock) as broker:
        broker.create_topic("events", cfg["partitions"])
        for p in range(cfg["partitions"]):    # enough backlog that every member stays busy
            broker.append_records("events", p, [(clock.now_ms(), b"k", b"v", ())] * 2000)
        for t in range(cfg["trials"]):
            for assignor in assignors:
                # both protocols see the same seeded timings in trial t
                trials[assignor].append(_scale_out(broker, clock, assignor, f"t{t}", cfg,
                                                   random.Random(f"{seed}:{t}")))
    summary = {}
    for a in assignors:
        rows = trials[a]
        summary[a] = {
            "assignor": a, "protocol": rows[0]["protocol"],
            "mean_paused_partition_seconds": round(
                sum(r["paused_partition_seconds"] for r in rows) / len(rows), 3),
            "mean_revoked": round(sum(r["revoked_count"] for r in rows) / len(rows), 3),
            "rebalance_rounds": sorted({r["rebalance_rounds"] for r in rows}),
            "trials": rows,
        }
    echo(f"Scale-out {cfg['before']} → {cfg['before'] + 1} consumers on {cfg['partitions']} partitions "
         f"(c0 takes {cfg['slow_ms']} ms per batch, the others {cfg['process_ms']} ms ± "
         f"{cfg['jitter']:.0%}); trial 0 in detail:\n")
    for a in assignors:
        r = trials[a][0]
        echo(f"== {r['assignor']} ({r['protocol']})")
        echo("before:  " + "  ".join(f"{c}:{','.join(map(str, p)) or '-'}" for c, p in r["before"].items()))
        echo("after:   " + "  ".join(f"{c}:{','.join(map(str, p)) or '-'}" for c, p in r["after"].items()))
        echo("revoked: " + ("  ".join(f"{c}:{','.join(p)}" for c, p in r["revoked"].items()) or "nothing"))
        echo("")
    echo(table(["trial"] + [f"{a}: revoked / paused partition-s / rounds" for a in assignors],
               [[t] + [f"{trials[a][t]['revoked_count']} / {trials[a][t]['paused_partition_seconds']} / "
                       f"{trials[a][t]['rebalance_rounds']}" for a in assignors]
                for t in range(cfg["trials"])]))
    eager, coop = (summary[a] for a in assignors)
    echo(f"\nMean over {cfg['trials']} trials: cooperative paused "
         f"{coop['mean_paused_partition_seconds']} partition-s against "
         f"{eager['mean_paused_partition_seconds']} for eager ({eager['assignor']}), revoking "
         f"{coop['mean_revoked']} partitions instead of {eager['mean_revoked']}, at the price of "
         f"{coop['rebalance_rounds']} rebalance rounds instead of {eager['rebalance_rounds']}.")
    return {"simulated_ms": clock.now_ms() - START_MS,
            "partitions": cfg["partitions"], "before": cfg["before"], "trials": cfg["trials"],
            "eager": eager, "cooperative": coop}


if __name__ == "__main__":
    raise SystemExit(main_for("eager_vs_cooperative"))
