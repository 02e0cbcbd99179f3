"""Lab: assignor comparison — uneven subscriptions, and what moves when a member leaves.

What you will see
-----------------
The example from Kafka's own ``StickyAssignor`` documentation: three topics ``t0``,
``t1`` and ``t2`` with 1, 2 and 3 partitions, and three consumers of one group with
*different* subscriptions: C0 reads t0; C1 reads t0 and t1; C2 reads t0, t1 and t2.

For each assignor (``range``, ``roundrobin``, ``sticky``, ``cooperative-sticky``) a real
group of three consumers runs on the broker until it is stable; the first table shows
who owns what. Kafka's documentation gives, and the lab checks:

- RoundRobin: C0 owns t0p0; C1 owns t1p0; C2 owns t1p1, t2p0, t2p1 and t2p2 — C2 carries
  four partitions while C1, which could read t1, carries one;
- Sticky: C0 owns t0p0; C1 owns t1p0 and t1p1; C2 owns t2p0, t2p1 and t2p2 — as even
  as the subscriptions allow.

Then C0 leaves the group (``close()`` sends a LeaveGroup) and the group rebalances.
The second table shows the new owners and the **moves**: partitions that changed owner
although their owner is still in the group (t0p0 has to move: its owner left). Kafka's
documentation: RoundRobin keeps 3 of the assignments (C1 owns t0p0 and t1p1, C2 owns
t1p0 and t2p0..t2p2: t1p0 and t1p1 swap owners for nothing), Sticky keeps 5 (C1 owns t0p0,
t1p0 and t1p1; nothing else moves).

Why
---
RoundRobin lays the partitions out in order and deals them to the members in turn,
skipping members that do not subscribe; it looks at neither the load nor the previous
owners. Range works per topic. The sticky assignors (KIP-54, KIP-429) first balance
the load as well as the subscriptions allow and then keep every partition whose owner
is still there: a move costs a consumer its state and cache, and with the eager
protocol a paused partition. Each real group's result is also compared with the pure
assignor (``kafkasim.assignors``, Kafka-exact) on the same input.

The picture ``assignor-comparison-owners.png`` is an owner grid: one row per partition,
one column per assignor and phase, moved partitions framed in red.

Kafka references: ``AbstractStickyAssignor`` and ``StickyAssignor`` javadoc (this
example), ``RoundRobinAssignor``, ``RangeAssignor``, KIP-54, KIP-429.

Invariants: the same seed and params give the same text, JSON and PNG bytes; the lab
writes only into its data dir (wiped first) and ``plot_dir``.
Thread-safety: one run per data dir at a time; the module keeps no state between runs.

Run it: ``kafkasim scenario run assignor-comparison`` or
``python -m kafkasim.scenarios.assignor_comparison``.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Optional

from kafkasim.assignors import Subscription, get_assignor
from kafkasim.errors import InvalidArgumentError
from kafkasim.scenarios import _figures as fig
from kafkasim.scenarios._common import (
    lab_clock,
    START_MS, GroupDriver, check_claim, fmt_assignment, fresh_broker, main_for, table,
)
from kafkasim.types import TopicPartition

__all__ = ["PARAMS", "CLAIM", "run", "TOPICS", "SUBSCRIPTIONS", "EXPECTED"]

PARAMS: dict[str, Any] = {
    "assignors": ["range", "roundrobin", "sticky", "cooperative-sticky"],
    "leaving": "C0",            # the member that leaves after the first assignment
}

CLAIM = ("On the uneven subscriptions of Kafka's StickyAssignor example, RoundRobin loads C2 with "
         "four partitions and Sticky balances them, and when a member leaves Sticky moves nothing "
         "that did not have to move while RoundRobin moves partitions between the members that stay.")

TOPICS: dict[str, int] = {"t0": 1, "t1": 2, "t2": 3}
SUBSCRIPTIONS: dict[str, list[str]] = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
EXPECTED: dict[str, dict[str, dict[str, list[str]]]] = {
    # Kafka's StickyAssignor javadoc, word for word (partitions sorted)
    "roundrobin": {"before": {"C0": ["t0p0"], "C1": ["t1p0"], "C2": ["t1p1", "t2p0", "t2p1", "t2p2"]},
                   "after": {"C1": ["t0p0", "t1p1"], "C2": ["t1p0", "t2p0", "t2p1", "t2p2"]}},
    "sticky": {"before": {"C0": ["t0p0"], "C1": ["t1p0", "t1p1"], "C2": ["t2p0", "t2p1", "t2p2"]},
               "after": {"C1": ["t0p0", "t1p0", "t1p1"], "C2": ["t2p0", "t2p1", "t2p2"]}},
}
"""The assignments Kafka's documentation gives for this example when C0 leaves."""


def _name(tp: TopicPartition) -> str:
    return f"{tp.topic}p{tp.partition}"


def _pure(assignor: str, members: dict[str, list[str]], owned: dict[str, list[str]],
          generation: int) -> dict[str, list[str]]:
    """The pure assignor on the same input (member ids sort as the group's ``<client>-<uuid>``)."""
    subs = {m: Subscription(topics, owned_partitions=[
        TopicPartition(s[:2], int(s[3:])) for s in owned.get(m, [])], generation_id=generation)
        for m, topics in members.items()}
    out = get_assignor(assignor).assign(TOPICS, subs)
    return {m: [_name(tp) for tp in tps] for m, tps in out.items()}


def _owners(driver: GroupDriver, group: str) -> dict[str, list[str]]:
    return {m.name: sorted(_name(tp) for tp in m.consumer.assignment()) for m in driver.live(group)}


def _moves(before: dict[str, list[str]], after: dict[str, list[str]], leaving: str) -> dict:
    owner_before = {p: m for m, ps in before.items() for p in ps}
    owner_after = {p: m for m, ps in after.items() for p in ps}
    forced = sorted(p for p, m in owner_before.items() if m == leaving)
    moved = sorted(p for p, m in owner_before.items() if m != leaving and owner_after.get(p) != m)
    kept = sum(1 for p, m in owner_before.items() if owner_after.get(p) == m)
    return {"forced": forced, "moved": moved, "kept": kept}


def _fmt(owners: dict[str, list[str]]) -> str:
    return fmt_assignment(owners, prefix="")


def run(data_dir: str, *, seed: int = 42, echo: Callable[[str], Any] = print,
        plot_dir: Optional[str] = None, **params: Any) -> dict:
    """Run the lab (see the module docstring); return owners before/after per assignor."""
    cfg = {**PARAMS, **params}
    leaving = cfg["leaving"]
    if leaving not in SUBSCRIPTIONS:
        raise InvalidArgumentError(f"leaving member {leaving!r} is not one of {', '.join(SUBSCRIPTIONS)}")
    rng = random.Random(seed)
    clock = lab_clock()
    runs: dict[str, dict] = {}
    with fresh_broker(data_dir, clock) as broker:
        for topic, n in TOPICS.items():
            broker.create_topic(topic, n)
        for assignor in cfg["assignors"]:
            group = f"lab-{assignor}"
            driver = GroupDriver(broker, clock, rng=random.Random(rng.randrange(1 << 30)))
            for member, topics in SUBSCRIPTIONS.items():
                m = driver.add(member, topics[0], group, partition_assignment_strategy=[assignor])
                m.consumer.subscribe(topics)
            driver.run_until_stable(group)
            before = _owners(driver, group)
            gen_before = broker.describe_group(group)["generation"]
            gone = next(m for m in driver.live(group) if m.name == leaving)
            gone.consumer.close()
            gone.alive = False
            took = driver.run_until_stable(group)
            after = _owners(driver, group)
            gen_after = broker.describe_group(group)["generation"]
            for m in driver.live(group):
                m.consumer.close()
                m.alive = False
            pure_before = _pure(assignor, SUBSCRIPTIONS, {}, -1)
            rest = {m: t for m, t in SUBSCRIPTIONS.items() if m != leaving}
            pure_after = _pure(assignor, rest, before, gen_before)
            runs[assignor] = {"before": before, "after": after, "pure_before": pure_before,
                              "pure_after": pure_after, "rebalance_ms": took,
                              "rebalances_after_leave": gen_after - gen_before,
                              **_moves(before, after, leaving)}

    echo(f"Topics t0, t1 and t2 have 1, 2 and 3 partitions. C0 reads t0; C1 reads t0 and t1; "
         f"C2 reads t0, t1 and t2. One real group per assignor.\n")
    echo("Owners with all three members:")
    echo(table(["assignor", "owners", "most on one member"],
               [[a, _fmt(r["before"]), f"{max(len(v) for v in r['before'].values())} partitions"]
                for a, r in runs.items()]))
    echo(f"\nOwners after {leaving} leaves:")
    echo(table(["assignor", "owners", "kept", "moved without need", "rebalances"],
               [[a, _fmt(r["after"]), f"{r['kept']} of 6", ", ".join(r["moved"]) or "none",
                 r["rebalances_after_leave"]] for a, r in runs.items()]))
    for a, r in runs.items():
        check_claim(r["before"] == r["pure_before"] and r["after"] == r["pure_after"], CLAIM,
                    f"the {a} group on the broker assigned {_fmt(r['before'])} then {_fmt(r['after'])}; "
                    f"the pure {a} assignor {_fmt(r['pure_before'])} then {_fmt(r['pure_after'])}")
    echo("\nEvery group on the broker got exactly what the pure assignor computes for the same input.")
    coop = runs.get("cooperative-sticky")
    if coop and coop["rebalances_after_leave"] == 1:
        echo(f"cooperative-sticky needed a single rebalance: the only partitions to move "
             f"({', '.join(coop['forced'])}) had lost their owner, so no member had to revoke "
             "anything first.")

    result: dict[str, Any] = {"claim": CLAIM, "simulated_ms": clock.now_ms() - START_MS, "topics": TOPICS,
                              "subscriptions": SUBSCRIPTIONS, "leaving": leaving,
                              "assignors": runs, "pictures": []}
    if plot_dir is not None:
        result["pictures"] = [_picture(plot_dir, runs, leaving)]
    if leaving == "C0":
        for a, exp in EXPECTED.items():
            r = runs.get(a)
            check_claim(r is None or (r["before"] == exp["before"] and r["after"] == exp["after"]), CLAIM,
                        f"{a} gave {_fmt(r['before'])} then {_fmt(r['after'])}; Kafka's documentation "
                        f"gives {_fmt(exp['before'])} then {_fmt(exp['after'])}" if r else "")
    rr, st = runs.get("roundrobin"), runs.get("sticky")
    check_claim(rr is not None and st is not None, CLAIM,
                f"the lab compares roundrobin with sticky, but assignors is {', '.join(runs)}")
    check_claim(not st["moved"] and rr["moved"] and st["kept"] > rr["kept"], CLAIM,
                f"after {leaving} left, sticky moved {len(st['moved'])} partitions without need and kept "
                f"{st['kept']} of 6; roundrobin moved {len(rr['moved'])} and kept {rr['kept']}")
    rng_ = runs.get("range")
    if rng_ is not None and not rng_["moved"]:
        most = max(len(v) for v in rng_["before"].values())
        echo(f"range moved nothing either: it assigns each topic on its own, so {leaving}'s "
             f"partitions simply went to the first remaining member that reads their topic; but, "
             f"like roundrobin, it had loaded one member with {most} partitions to begin with.")
    echo(f"\nSo: sticky kept {st['kept']} of 6 assignments and moved only what {leaving} owned; "
         f"roundrobin kept {rr['kept']} and moved {', '.join(rr['moved'])} between members that stayed.")
    return result


def _picture(plot_dir: str, runs: dict[str, dict], leaving: str) -> str:
    from matplotlib.patches import Patch, Rectangle

    parts = [f"{t}p{p}" for t, n in TOPICS.items() for p in range(n)]
    colours = fig.colour_map(sorted(SUBSCRIPTIONS))
    cols = [(a, phase) for a in runs for phase in ("before", "after")]
    figure, (ax,) = fig.figure(f"Owner of each partition per assignor, before and after {leaving} "
                               "leaves\n(red frame: moved between members that stayed)")
    for x, (a, phase) in enumerate(cols):
        owner = {p: m for m, ps in runs[a][phase].items() for p in ps}
        for y, p in enumerate(parts):
            m = owner.get(p)
            ax.add_patch(Rectangle((x, y), 1, 1, facecolor=colours[m] if m else fig.UNOWNED,
                                   edgecolor="white", alpha=0.75))
            ax.text(x + 0.5, y + 0.5, m or "-", ha="center", va="center", fontsize=9)
            if phase == "after" and p in runs[a]["moved"]:
                ax.add_patch(Rectangle((x + 0.05, y + 0.05), 0.9, 0.9, fill=False,
                                       edgecolor="#d62728", linewidth=2.5))
    ax.grid(False)
    ax.set_xlim(0, len(cols))
    ax.set_ylim(len(parts), 0)
    ax.set_xticks([i + 0.5 for i in range(len(cols))],
                  [f"{a}\n{'all three' if ph == 'before' else leaving + ' gone'}" for a, ph in cols],
                  fontsize=8)
    ax.set_yticks([i + 0.5 for i in range(len(parts))], parts)
    ax.set_xlabel("assignor and phase")
    ax.set_ylabel("partition")
    ax.legend(handles=[Patch(color=c, alpha=0.75, label=m) for m, c in colours.items()],
              title="owner", loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    return fig.save(figure, plot_dir, "assignor-comparison-owners")


if __name__ == "__main__":
    raise SystemExit(main_for("assignor-comparison"))
