"""Lab: consumer-group scaling — who owns which partition, and why extra consumers sit idle.

What you will see
-----------------
A topic with 6 partitions is read by one consumer group that grows step by step to
1, 2, 3, 6 and 10 members, once with the ``range`` assignor and once with
``cooperative-sticky``. After each step the group is allowed to settle and the table
shows each member's partitions, how many members are idle and the group's
**generation id** (it goes up by one on every completed rebalance).

Why
---
Within a group a partition is read by exactly one member (that is how Kafka keeps
per-partition order and scales reads), so a group can use at most as many consumers
as there are partitions: with 10 consumers on 6 partitions, **4 are idle** (hot
standbys that take over when a member leaves). Partitions are the unit of
parallelism; to scale further, add partitions (see the ``add_partitions`` lab for the
cost to keyed data).

``range`` (Kafka's ``RangeAssignor``) gives each member a contiguous range, members
sorted by member id; every rebalance is *eager*: all partitions are revoked and
reassigned, one rebalance per membership change. ``cooperative-sticky`` (KIP-429,
``CooperativeStickyAssignor``) keeps partitions where they are and moves only what
must move; a member that must give a partition up revokes it and rejoins, so a scale
step costs **two** rebalances (two generations) — see ``eager_vs_cooperative`` for
what that buys.

Kafka references: ``RangeAssignor``, ``CooperativeStickyAssignor``, KIP-429;
Kafka docs "Consumer groups" (``group.initial.rebalance.delay.ms`` = 3 s delays the
first rebalance of an empty group, which is why the first step takes ~3 s here).

Run it: ``kafkasim scenario run group_scaling`` or ``python -m kafkasim.scenarios.group_scaling``.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Optional

from kafkasim.clock import MockClock
from kafkasim.scenarios._common import START_MS, GroupDriver, fresh_broker, main_for, table

__all__ = ["PARAMS", "CLAIM", "run"]

CLAIM = ("A group uses at most one consumer per partition: with 6 partitions, consumers beyond 6 sit idle and add no throughput.")
"""The lab's point, asserted by :func:`run`."""

PARAMS: dict[str, Any] = {
    "partitions": 6,
    "sizes": [1, 2, 3, 6, 10],
    "assignors": ["range", "cooperative-sticky"],
    "records_per_partition": 20,
}


def run(data_dir: str, *, seed: int = 42, echo: Callable[[str], Any] = print,
        plot_dir: Optional[str] = None, **params: Any) -> dict:
    """Run the lab (see the module docstring); return one snapshot per assignor and size."""
    cfg = {**PARAMS, **params}
    n, sizes = cfg["partitions"], list(cfg["sizes"])
    rng = random.Random(seed)
    clock = MockClock(START_MS)
    result: dict[str, Any] = {"partitions": n, "sizes": sizes, "assignors": {}}
    with fresh_broker(data_dir, clock) as broker:
        broker.create_topic("events", n)
        for p in range(n):
            broker.append_records("events", p, [(clock.now_ms(), f"k{p}-{i}".encode(), b"v", ())
                                                for i in range(cfg["records_per_partition"])])
        for assignor in cfg["assignors"]:
            group = f"scaling-{assignor}"
            driver = GroupDriver(broker, clock)
            steps = []
            for size in sizes:
                while len(driver.live(group)) < size:
                    i = len(driver.live(group))
                    driver.add(f"c{i:02d}", "events", group,
                               partition_assignment_strategy=[assignor])
                took = driver.run_until_stable(group)
                # a little jitter between steps, from the seeded RNG (not needed for the
                # result, it shows the outcome does not depend on exact timing)
                driver.run(1000 + 100 * rng.randrange(10))
                owners = driver.assignments(group)
                idle = sorted(name for name, tps in owners.items() if not tps)
                gen = broker.describe_group(group)["generation"]
                steps.append({"consumers": size, "generation": gen, "settle_ms": took,
                              "assignment": owners, "idle": idle, "idle_count": len(idle)})
            for m in driver.live(group):
                m.consumer.close()
                m.alive = False
            result["assignors"][assignor] = steps
            echo(f"== {assignor} ({n} partitions)")
            echo(table(["consumers", "generation", "idle", "settled in", "who owns what"],
                       [[s["consumers"], s["generation"], s["idle_count"], f"{s['settle_ms']} ms",
                         " ".join(f"{c}:{','.join(map(str, tps)) or '-'}"
                                  for c, tps in s["assignment"].items())] for s in steps]))
            echo("")
    last = {a: steps[-1] for a, steps in result["assignors"].items()}
    for a, s in last.items():
        echo(f"{a}: with {s['consumers']} consumers on {n} partitions, "
             f"{s['idle_count']} are idle ({', '.join(s['idle']) or 'none'}).")
    result["simulated_ms"] = clock.now_ms() - START_MS
    return result


if __name__ == "__main__":
    raise SystemExit(main_for("group_scaling"))
