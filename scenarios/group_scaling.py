"""Lab: consumer scaling — more consumers help only up to one per partition.

What you will see
-----------------
A topic with ``partitions`` (6) partitions receives ``rate`` records per second per
partition. A consumer group reads it with 1, 2, 3 and 10 members (``sizes``), a fresh
group and topic each time. Every member loops ``poll → process → commit``; a poll returns
at most ``max_poll_records`` records and processing takes ``process_ms`` per batch, so one
member handles at most ``max_poll_records / process_ms`` records per second (150/s by
default). For each size the lab shows who owns which partition, the idle members, and,
over ``measure_s`` simulated seconds, the group's **throughput** (records processed per
second) and its **lag** (records produced but not yet processed).

Why
---
Within a group a partition is read by exactly one member (that is how Kafka keeps
per-partition order), so a group can use at most as many consumers as there are
partitions. With 10 consumers on 6 partitions, **4 are idle** (hot standbys that take over
when a member leaves), and throughput stops growing at 6 busy members: here 6 × 150 = 900
records per second, while 1,200 arrive, so even 10 consumers fall behind. Partitions are
the unit of parallelism; to go further, add partitions (see ``partition-count-change`` for
what that costs keyed data) or make each record cheaper to process.

The assignor is ``range`` (Kafka's ``RangeAssignor``: contiguous ranges, members sorted by
member id). ``group.initial.rebalance.delay.ms`` (3 s) delays the first rebalance of an
empty group, so measuring starts once the group is Stable.

Kafka references: ``RangeAssignor``; Kafka docs "Consumers" and "Consumer groups".

Run it: ``kafkasim scenario run consumer-scaling --plot-dir pics``.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Optional

from kafkasim.clock import MockClock
from kafkasim.scenarios import _figures as fig
from kafkasim.scenarios._common import (
    START_MS, GroupDriver, check_claim, fmt_assignment, fresh_broker, main_for, table,
)

__all__ = ["PARAMS", "CLAIM", "run"]

CLAIM = ("A group uses at most one consumer per partition: with 6 partitions, consumers beyond "
         "6 sit idle and throughput stops growing at 6 busy members.")
"""The lab's point, asserted by :func:`run`."""

PARAMS: dict[str, Any] = {
    "partitions": 6,
    "sizes": [1, 2, 3, 10],
    "assignor": "range",
    "rate": 200,              # records per second per partition
    "max_poll_records": 30,   # per poll
    "process_ms": 200,        # per polled batch
    "measure_s": 20,          # simulated seconds measured per size
}


def _one_size(broker, clock: MockClock, size: int, cfg: dict, rng: random.Random) -> dict:
    n, topic, group = cfg["partitions"], f"events-{size}", f"scaling-{size}"
    broker.create_topic(topic, n)
    driver = GroupDriver(broker, clock, rng=rng)
    for i in range(size):
        driver.add(f"c{i:02d}", topic, group, process_ms=cfg["process_ms"],
                   max_poll_records=cfg["max_poll_records"],
                   partition_assignment_strategy=[cfg["assignor"]])
    settle_ms = driver.run_until_stable(group)
    owners = driver.assignments(group)
    per_step = cfg["rate"] * driver.step_ms // 1000
    produced = 0
    done0 = {m.name: len(m.processed) for m in driver.members}
    seconds, throughput, lag = [], [], []
    last = 0
    for step in range(cfg["measure_s"] * 1000 // driver.step_ms):
        for p in range(n):
            broker.append_records(topic, p, [(clock.now_ms(), f"k{p}".encode(), b"v", ())] * per_step)
        produced += per_step * n
        driver.step()
        if (step + 1) * driver.step_ms % 1000 == 0:
            processed = sum(len(m.processed) - done0[m.name] for m in driver.members)
            seconds.append((step + 1) * driver.step_ms / 1000)
            throughput.append(processed - last)
            lag.append(produced - processed)
            last = processed
    per_member = {m.name: len(m.processed) - done0[m.name] for m in driver.members}
    idle = sorted(name for name, tps in owners.items() if not tps)
    for m in driver.live(group):
        m.consumer.close()
        m.alive = False
    tail = throughput[len(throughput) // 2:]           # steady state: the second half
    return {"consumers": size, "generation": broker.describe_group(group)["generation"],
            "settle_ms": settle_ms, "assignment": owners, "idle": idle, "idle_count": len(idle),
            "throughput_per_s": round(sum(tail) / len(tail), 1), "final_lag": lag[-1],
            "processed_per_member": per_member,
            "over_time": {"t_s": seconds, "throughput_per_s": throughput, "lag": lag}}


def run(data_dir: str, *, seed: int = 42, echo: Callable[[str], Any] = print,
        plot_dir: Optional[str] = None, **params: Any) -> dict:
    """Run the lab (see the module docstring); return one measurement per group size."""
    cfg = {**PARAMS, **params}
    n, sizes = cfg["partitions"], list(cfg["sizes"])
    capacity = cfg["max_poll_records"] * 1000 / cfg["process_ms"]
    arriving = cfg["rate"] * n
    clock = MockClock(START_MS)
    with fresh_broker(data_dir, clock) as broker:
        steps = [_one_size(broker, clock, size, cfg, random.Random(f"{seed}:{size}")) for size in sizes]

    echo(f"{n} partitions, {arriving:,} records/s arriving ({cfg['rate']} per partition); one "
         f"member processes at most {capacity:g} records/s; assignor {cfg['assignor']}.\n")
    echo(table(["consumers", "idle", "throughput (records/s)", f"lag after {cfg['measure_s']} s",
                "who owns what"],
               [[s["consumers"], s["idle_count"], f"{s['throughput_per_s']:g}", s["final_lag"],
                 fmt_assignment(s["assignment"])] for s in steps]))
    echo("")
    for s in steps:
        busy = s["consumers"] - s["idle_count"]
        line = (f"With {s['consumers']} consumer{'s' if s['consumers'] != 1 else ''}: {busy} busy, "
                f"{s['throughput_per_s']:g} records/s, lag {s['final_lag']:,} records after "
                f"{cfg['measure_s']} s")
        if s["idle"]:
            line += (f"; {s['idle_count']} idle ({', '.join(s['idle'])}) processed "
                     f"{sum(s['processed_per_member'][c] for c in s['idle'])} records")
        echo(line + ".")
    ceiling = min(n, max(sizes)) * capacity
    echo(f"\nThe ceiling is one busy member per partition: {min(n, max(sizes))} x {capacity:g} = "
         f"{ceiling:g} records/s, below the {arriving:,} records/s arriving, so the lag keeps "
         f"growing. More partitions, not more consumers, would raise it.")

    pictures = []
    if plot_dir is not None:
        pictures = _pictures(plot_dir, steps, cfg, arriving)
    result = {"claim": CLAIM, "pictures": pictures, "simulated_ms": clock.now_ms() - START_MS,
              "partitions": n, "sizes": sizes, "arriving_per_s": arriving,
              "member_capacity_per_s": capacity, "assignor": cfg["assignor"], "steps": steps}
    for s in steps:
        owned = sorted(p for tps in s["assignment"].values() for p in tps)
        check_claim(owned == list(range(n)) and s["idle_count"] == max(0, s["consumers"] - n)
                    and all(s["processed_per_member"][c] == 0 for c in s["idle"]), CLAIM,
                    f"{s['consumers']} consumers: owned {owned}, idle {s['idle']}")
        busy = min(s["consumers"], n)
        expected = min(busy * capacity, arriving)
        check_claim(abs(s["throughput_per_s"] - expected) <= 0.1 * expected, CLAIM,
                    f"{s['consumers']} consumers: throughput {s['throughput_per_s']}/s, "
                    f"expected about {expected:g}/s for {busy} busy members")
    return result


def _pictures(plot_dir: str, steps: list[dict], cfg: dict, arriving: float) -> list[str]:
    """Throughput (with the arriving rate and the one-member-per-partition ceiling), lag,
    and records per member at the largest size."""
    x = steps[0]["over_time"]["t_s"]
    label = {s["consumers"]: f"{s['consumers']} consumer{'s' if s['consumers'] != 1 else ''}"
             for s in steps}
    figure, axes = fig.figure(f"A group on {cfg['partitions']} partitions: throughput stops "
                              f"growing at one consumer per partition", 1, 3, size=(15, 5))
    fig.lines(x, {label[s["consumers"]]: s["over_time"]["throughput_per_s"] for s in steps},
              ax=axes[0], title="throughput", xlabel="time (s)",
              ylabel="records processed per second", limit=arriving,
              limit_label="arriving")
    busy = min(cfg["partitions"], max(s["consumers"] for s in steps))
    ceiling = busy * cfg["max_poll_records"] * 1000 / cfg["process_ms"]
    axes[0].axhline(ceiling, color=fig.AVERAGE, linestyle="--", linewidth=1.2,
                    label=f"ceiling: {busy} busy members, {ceiling:,.0f}")
    axes[0].legend(loc="center right", fontsize=8)
    fig.lines(x, {label[s["consumers"]]: s["over_time"]["lag"] for s in steps}, ax=axes[1],
              title="lag", xlabel="time (s)", ylabel="records not yet processed")
    big = steps[-1]
    members = list(big["processed_per_member"])
    fig.bars(members, [big["processed_per_member"][m] for m in members], ax=axes[2],
             title=f"records per member with {big['consumers']} consumers "
                   f"({big['idle_count']} idle)", xlabel="member",
             ylabel=f"records processed in {cfg['measure_s']} s")
    return [fig.save(figure, plot_dir, "consumer-scaling")]


if __name__ == "__main__":
    raise SystemExit(main_for("group_scaling"))
