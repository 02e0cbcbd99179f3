"""Lab: broker-side assignment (KIP-848) — ``uniform`` against ``range``, and a regex subscription.

What you will see
-----------------
In Kafka 4's consumer group protocol (``group.protocol=consumer``) the **broker** computes
the assignment, with one of its server assignors (``group.consumer.assignors``: ``uniform``,
the default, and ``range``); a member names the one it wants with
``group.remote.assignor``. The lab runs real in-process consumer groups of 4 members
(``Consumer(group_protocol="consumer", group_remote_assignor=...)``) on three topics of 3,
4 and 5 partitions (``payments``, ``refunds``, ``invoices``) and prints who got what:

1. **same subscriptions**: every member subscribes to all three topics. ``range`` assigns
   topic by topic, as the classic ``RangeAssignor`` does: each topic's partitions are split
   into ranges over the members in the same order, so the first members get the extra
   partition of every topic and the last gets none of a 3-partition topic. ``uniform``
   balances the *total* per member: 12 partitions over 4 members is 3 each.
2. **different subscriptions**: m0 reads all three topics, m1 ``payments`` and ``refunds``,
   m2 ``refunds`` and ``invoices``, m3 only ``invoices``. Both assignors give each member
   only partitions of its topics and split each topic among its subscribers. ``uniform``'s
   builder for different subscriptions (Kafka's ``UniformHeterogeneousAssignmentBuilder``)
   deals each topic to its least loaded subscribers, then evens out topic by topic; it does
   not search for the best totals, so here they can still differ by two.
3. **a regex subscription**: 3 members subscribe with ``subscribe(pattern="orders-.*")``;
   ``orders-eu`` exists. Then ``orders-us`` is created. The broker evaluates the regex
   (KIP-848's ``SubscribedTopicRegex``), bumps the group epoch and hands each member its
   share of the new topic in the response to its next regular heartbeat: no rejoin, no
   revocation, the member ids stay. The lab prints the member epochs before and after
   and how long each member took, in heartbeat intervals.

The pictures: the partitions per member and topic under each assignor (a grid, the totals
in the last column), and the member epochs and owned partitions over time around the
topic's creation.

Why
---
Kafka's ``RangeAssignor`` (classic, and the server-side ``range`` of KIP-848) exists for
co-partitioning: each topic is cut into ranges dealt to the members in one order, so with
equal partition counts partition *i* of every topic goes to the same member and a join of
two topics keyed alike stays local. The price is balance across topics: the remainders of
every topic land on the same members (here 4, 3, 3 and 2 partitions). ``uniform``
(``UniformAssignor``, Kafka 4's default) aims at an even total and sticks to the current
owners when the group changes. With a regex subscription the broker, not the client,
resolves the pattern against its topics, so a new matching topic reaches the members as
one more target assignment, delivered through the heartbeats they send anyway (kafkasim
resolves it at once; Kafka's broker refreshes regexes in the background at most every
10 s, so there it can take one refresh longer).

Kafka references: KIP-848 ("The Next Generation of the Consumer Rebalance Protocol"),
``group.consumer.assignors``, ``group.remote.assignor``, ``UniformAssignor``,
``RangeAssignor`` (org.apache.kafka.coordinator.group.assignor), Kafka's documentation
"Consumer Rebalance Protocol".

Run it: ``kafkasim scenario run broker-side-assignment --plot-dir pics``.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Optional

from kafkasim.consumer import ConsumerRebalanceListener
from kafkasim.errors import InvalidArgumentError
from kafkasim.scenarios import _figures as fig
from kafkasim.scenarios._common import (
    START_MS, GroupDriver, check_claim, fresh_broker, lab_clock, main_for, table,
)

__all__ = ["PARAMS", "CLAIM", "run"]

CLAIM = ("When every member subscribes to the same topics, the broker's uniform assignor gives "
         "each member within one partition of every other while range, assigning topic by "
         "topic, leaves a larger spread; and members subscribed by regex receive a newly "
         "created matching topic's partitions through their regular heartbeats, with no rejoin "
         "and no member losing a partition.")
"""The lab's point, asserted by :func:`run`."""

PARAMS: dict[str, Any] = {
    "partitions": [3, 4, 5],         # of the topics payments, refunds, invoices
    "members": 4,
    "regex_members": 3,
    "existing_partitions": 4,        # orders-eu, there from the start
    "new_partitions": 6,             # orders-us, created while the group runs
    "heartbeat_interval_ms": 5000,   # group.consumer.heartbeat.interval.ms (Kafka's default)
    "within_heartbeats": 2,          # the claim: the new topic arrives within this many intervals
}
TOPICS = ("payments", "refunds", "invoices")
ASSIGNORS = ("uniform", "range")
PATTERN = "orders-.*"
EXISTING, NEW = "orders-eu", "orders-us"


def _subscriptions(members: int) -> dict[str, list[str]]:
    """Part 2's different subscriptions: m0 all, m1 the first two, m2 the last two, m3 the last
    one, and so on round again for more members."""
    shapes = [list(TOPICS), list(TOPICS[:2]), list(TOPICS[1:]), [TOPICS[2]]]
    return {f"m{i}": shapes[i % len(shapes)] for i in range(members)}


class _Events(ConsumerRebalanceListener):
    """What one member's rebalance callbacks saw: ``(t_ms, kind, partitions)``."""

    def __init__(self, clock, out: list) -> None:
        self.clock, self.out = clock, out

    def on_partitions_revoked(self, revoked):
        self.out.append((self.clock.now_ms(), "revoked", [str(tp) for tp in revoked]))

    def on_partitions_lost(self, lost):
        self.out.append((self.clock.now_ms(), "lost", [str(tp) for tp in lost]))

    def on_partitions_assigned(self, assigned):
        self.out.append((self.clock.now_ms(), "assigned", [str(tp) for tp in assigned]))


def _group(broker, clock, group: str, assignor: str, subs: dict[str, list[str]], seed: int) -> dict:
    """Run one consumer group to Stable; return each member's partitions per topic."""
    driver = GroupDriver(broker, clock)
    for name, topics in subs.items():
        driver.add(name, None, group, topics=topics, commit=False, group_protocol="consumer",
                   group_remote_assignor=assignor, seed=f"{seed}:{group}")
    driver.run_until_stable(group)
    owned = {m.name: {t: sorted(tp.partition for tp in m.consumer.assignment() if tp.topic == t)
                      for t in TOPICS} for m in driver.live(group)}
    desc = broker.describe_group(group)
    for m in driver.live(group):
        m.consumer.close()
    return {"assignor": assignor, "group_epoch": desc["group_epoch"], "protocol": desc["protocol"],
            "subscriptions": subs, "assignment": owned,
            "per_member": {n: sum(len(ps) for ps in by.values()) for n, by in owned.items()},
            "spread": _spread(owned)}


def _spread(owned: dict) -> int:
    counts = [sum(len(ps) for ps in by.values()) for by in owned.values()]
    return max(counts) - min(counts)


def _regex(broker, clock, cfg: dict, seed: int) -> dict:
    """Part 3: regex members, then a matching topic is created."""
    group = "regex-uniform"
    hb = cfg["heartbeat_interval_ms"]
    driver = GroupDriver(broker, clock)
    events: dict[str, list] = {}
    rng = random.Random(f"{seed}:regex")
    for i in range(cfg["regex_members"]):
        name = f"r{i}"
        events[name] = []
        if i:                         # members start apart: their heartbeats fall at different times
            driver.run(100 * rng.randrange(1, hb // 100))
        driver.add(name, None, group, pattern=PATTERN, commit=False, group_protocol="consumer",
                   group_remote_assignor="uniform", seed=f"{seed}:{group}",
                   listener=_Events(clock, events[name]))
    driver.run_until_stable(group)
    driver.run(hb + 100 * rng.randrange(hb // 100))    # the topic is created at a seeded phase
    members = {m.name: m.consumer for m in driver.live(group)}

    def snapshot() -> dict:
        d = broker.describe_group(group)
        return {"group_epoch": d["group_epoch"],
                "member_epochs": {n: c.generation_id for n, c in members.items()},
                "member_ids": {n: c.member_id for n, c in members.items()},
                "owned": {n: sorted(str(tp) for tp in c.assignment()) for n, c in members.items()}}

    before = snapshot()
    created = clock.now_ms()
    broker.create_topic(NEW, cfg["new_partitions"])
    mark = {n: len(e) for n, e in events.items()}
    received: dict[str, Optional[int]] = {n: None for n in members}
    window = hb * (cfg["within_heartbeats"] + 2)
    start = created - hb
    trace = []

    def record() -> None:
        now = clock.now_ms()
        trace.append((round((now - start) / 1000, 3), broker.describe_group(group)["group_epoch"],
                      {n: c.generation_id for n, c in members.items()},
                      {n: len(c.assignment()) for n, c in members.items()}))
        for n, c in members.items():
            if received[n] is None and any(tp.topic == NEW for tp in c.assignment()):
                received[n] = now - created

    for _ in range(window // driver.step_ms):
        driver.step()
        record()
    driver.run_until_stable(group)
    after = snapshot()
    since = {n: e[mark[n]:] for n, e in events.items()}    # before close() revokes everything
    for c in members.values():
        c.close()
    losses = {n: [p for _, kind, ps in e if kind in ("revoked", "lost") for p in ps]
              for n, e in since.items()}
    new_owned = sorted(p for ps in after["owned"].values() for p in ps if p.startswith(NEW + "-"))
    # the trace before the creation: the same state held since start (drawn from start)
    pre = (0.0, before["group_epoch"], before["member_epochs"],
           {n: len(ps) for n, ps in before["owned"].items()})
    trace.insert(0, pre)
    series = {"t_s": [t for t, *_ in trace], "group_epoch": [g for _, g, _, _ in trace],
              "member_epoch": {n: [e[n] for _, _, e, _ in trace] for n in members},
              "owned": {n: [o[n] for _, _, _, o in trace] for n in members}}
    return {"group": group, "pattern": PATTERN, "existing_topic": EXISTING, "new_topic": NEW,
            "heartbeat_interval_ms": hb, "created_at_s": round((created - start) / 1000, 3),
            "before": before, "after": after,
            "received_after_ms": received,
            "received_within_heartbeats": {n: None if ms is None else -(-ms // hb)
                                           for n, ms in received.items()},
            "callbacks_after_creation": {n: [[t - created, kind, ps] for t, kind, ps in e]
                                         for n, e in since.items()},
            "partitions_lost": losses, "new_topic_partitions_owned": new_owned,
            "series": series}


def run(data_dir: str, *, seed: int = 42, echo: Callable[[str], Any] = print,
        plot_dir: Optional[str] = None, **params: Any) -> dict:
    """Run the lab (see the module docstring); return the assignments and the regex run."""
    cfg = {**PARAMS, **params}
    if len(cfg["partitions"]) != len(TOPICS) or min(cfg["partitions"]) < 1:
        raise InvalidArgumentError(f"partitions={cfg['partitions']}: give {len(TOPICS)} positive "
                                   f"partition counts, one per topic ({', '.join(TOPICS)})")
    if cfg["members"] < 2 or cfg["regex_members"] < 1:
        raise InvalidArgumentError(f"members={cfg['members']}, regex_members={cfg['regex_members']}: "
                                   "at least 2 members and 1 regex member")
    if cfg["new_partitions"] < cfg["regex_members"] or cfg["existing_partitions"] < 1:
        raise InvalidArgumentError(
            f"new_partitions={cfg['new_partitions']}, existing_partitions={cfg['existing_partitions']}: "
            f"the new topic needs a partition for each of the {cfg['regex_members']} regex members, "
            "and the existing one at least 1")
    if not 1000 <= cfg["heartbeat_interval_ms"] <= 15_000:
        raise InvalidArgumentError(f"heartbeat_interval_ms={cfg['heartbeat_interval_ms']}: between 1000 "
                                   "and 15000 (group.consumer.max.heartbeat.interval.ms's default)")
    clock = lab_clock()
    hb = cfg["heartbeat_interval_ms"]
    configs = {"group.consumer.heartbeat.interval.ms": hb,
               "group.consumer.min.heartbeat.interval.ms": min(hb, 5000),
               "group.consumer.max.heartbeat.interval.ms": max(hb, 15_000),
               "group.consumer.session.timeout.ms": max(45_000, 3 * hb),
               "group.consumer.max.session.timeout.ms": max(60_000, 3 * hb)}
    same = {f"m{i}": list(TOPICS) for i in range(cfg["members"])}
    different = _subscriptions(cfg["members"])
    with fresh_broker(data_dir, clock, configs, topic_id_seed=f"{seed}:topics") as broker:
        for t, n in zip(TOPICS, cfg["partitions"]):
            broker.create_topic(t, n)
        broker.create_topic(EXISTING, cfg["existing_partitions"])
        parts = {"same": {a: _group(broker, clock, f"same-{a}", a, same, seed) for a in ASSIGNORS},
                 "different": {a: _group(broker, clock, f"different-{a}", a, different, seed)
                               for a in ASSIGNORS}}
        regex = _regex(broker, clock, cfg, seed)
    counts = dict(zip(TOPICS, cfg["partitions"]))
    echo(f"Topics {', '.join(f'{t} ({n} partitions)' for t, n in counts.items())}; "
         f"{cfg['members']} members of Kafka 4's consumer protocol; the broker assigns.\n")
    for key, title in (("same", "1. same subscriptions: every member reads all three topics"),
                       ("different", "2. different subscriptions")):
        echo(f"== {title}")
        if key == "different":
            echo("; ".join(f"{n} reads {', '.join(ts)}" for n, ts in different.items()))
        for a in ASSIGNORS:
            r = parts[key][a]
            echo(f"{a}: spread {r['spread']} (max - min partitions per member)")
            echo(table(["member", *TOPICS, "total"],
                       [[n, *(_parts(by[t]) for t in TOPICS), r["per_member"][n]]
                        for n, by in r["assignment"].items()]))
        echo("")
    echo(f"== 3. a regex subscription: {cfg['regex_members']} members subscribe to {PATTERN!r}; "
         f"{EXISTING} has {cfg['existing_partitions']} partitions, then {NEW} "
         f"({cfg['new_partitions']} partitions) is created")
    b, a = regex["before"], regex["after"]
    echo(table(["member", "epoch before", "epoch after", "owned before", "owned after",
                f"got {NEW} after", "same member id"],
               [[n, b["member_epochs"][n], a["member_epochs"][n], _tps(b["owned"][n]),
                 _tps(a["owned"][n]), _after(regex["received_after_ms"][n], regex["received_within_heartbeats"][n]),
                 "yes" if b["member_ids"][n] == a["member_ids"][n] else "no"]
                for n in b["member_epochs"]]))
    lost = sorted(p for ps in regex["partitions_lost"].values() for p in ps)
    echo(f"Group epoch {b['group_epoch']} → {a['group_epoch']}; partitions revoked or lost after "
         f"the creation: {', '.join(lost) if lost else 'none'}; {NEW} owned: "
         f"{len(regex['new_topic_partitions_owned'])} of {cfg['new_partitions']} partitions.")
    su, sr = parts["same"]["uniform"], parts["same"]["range"]
    echo(f"\nSame subscriptions: uniform's spread {su['spread']}, range's {sr['spread']}.")
    pictures = _pictures(plot_dir, parts, regex, cfg) if plot_dir is not None else []
    result = {"claim": CLAIM, "pictures": pictures, "simulated_ms": clock.now_ms() - START_MS,
              "topics": counts, "assignments": parts, "regex": regex}
    check_claim(su["spread"] <= 1 < sr["spread"], CLAIM,
                f"same subscriptions: uniform spread {su['spread']}, range spread {sr['spread']}")
    late = {n: h for n, h in regex["received_within_heartbeats"].items()
            if h is None or h > cfg["within_heartbeats"]}
    check_claim(not late and not lost and all(b["member_ids"][n] == a["member_ids"][n] for n in b["member_ids"])
                and len(regex["new_topic_partitions_owned"]) == cfg["new_partitions"], CLAIM,
                f"regex: members late (heartbeat intervals) {late or 'none'}, partitions lost "
                f"{lost or 'none'}, {NEW} partitions owned {len(regex['new_topic_partitions_owned'])} "
                f"of {cfg['new_partitions']}")
    return result


def _parts(ps: list[int]) -> str:
    return ", ".join(f"p{p}" for p in ps) or "-"


def _tps(tps: list[str]) -> str:
    return ", ".join(tps) or "none"


def _after(ms: Optional[int], beats: Optional[int]) -> str:
    if ms is None:
        return "never"
    return f"{ms / 1000:.1f} s (within {beats} heartbeat interval{'s' if beats != 1 else ''})"


def _pictures(plot_dir: str, parts: dict, regex: dict, cfg: dict) -> list[str]:
    figure, axes = fig.figure("Partitions per member and topic, assigned by the broker "
                              "(KIP-848): uniform evens the totals, range splits topic by topic",
                              2, 2, size=(12, 8))
    cols = [*TOPICS, "total"]
    for row, key in enumerate(("same", "different")):
        for col, a in enumerate(ASSIGNORS):
            r = parts[key][a]
            matrix = [[len(by[t]) for t in TOPICS] + [r["per_member"][n]]
                      for n, by in r["assignment"].items()]
            fig.grid(matrix, list(r["assignment"]), cols, ax=axes[2 * row + col],
                     title=f"{key} subscriptions, {a}: spread {r['spread']}",
                     xlabel="topic", ylabel="member", colourbar="partitions")
    paths = [fig.save(figure, plot_dir, "broker-side-assignment-grid")]
    s = regex["series"]
    event = [(regex["created_at_s"], f"{NEW} created")]
    figure, axes = fig.figure(f"A regex subscription ({PATTERN}): the new topic arrives with the "
                              f"next heartbeats (every {cfg['heartbeat_interval_ms']} ms), no rejoin",
                              1, 2, size=(13, 5))
    fig.lines(s["t_s"], {"group epoch": s["group_epoch"],
                         **{f"{n} member epoch": v for n, v in s["member_epoch"].items()}},
              ax=axes[0], title="group and member epochs", xlabel="time (s)", ylabel="epoch",
              events=event, step=True)
    fig.lines(s["t_s"], {n: v for n, v in s["owned"].items()}, ax=axes[1],
              title="partitions owned per member", xlabel="time (s)", ylabel="partitions (count)",
              events=event, step=True)
    paths.append(fig.save(figure, plot_dir, "broker-side-assignment-regex"))
    return paths


if __name__ == "__main__":
    raise SystemExit(main_for("broker_side_assignment"))
