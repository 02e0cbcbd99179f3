"""Lab: rebalance protocols — eager against cooperative-sticky when a member joins or crashes.

What you will see
-----------------
A group reads a topic (12 partitions) with a **stateful** app: each partition has state (a
Kafka Streams task's store) that a *new* owner must restore before it can process the
partition (``restore_ms``, 10 s: replaying a changelog); a partition that returns to its previous owner keeps its
local state. Each member loops ``poll → process → commit``; c0 is slow (``slow_ms`` per
batch, the others ``process_ms`` ± ``jitter``). Two events, each run ``trials`` times with
seeded timings, with an **eager** assignor (``range`` by default, or ``sticky``) and with
**cooperative-sticky**:

- **join**: 3 members, a 4th joins;
- **crash**: 4 members, c1 stops (no more polls or heartbeats); the coordinator evicts it
  after ``session_timeout_ms`` (10 s here; Kafka's default is 45 s).

For each run the lab measures, from the event until every partition is processed again,
the **paused partition-seconds** (for every partition, the time nobody processed it —
without an owner or restoring — summed) and the **longest pause** of one partition, plus
the partitions revoked and the rebalance rounds (generations). The timeline picture shows
who owned each partition when.

Why
---
Eager protocol (Kafka's classic rebalance): every member revokes **all** its partitions at
its next ``poll()`` and rejoins; the JoinGroup barrier waits for the slowest member (c0
finishing its batch), so every partition stops: a stop-the-world pause. Cooperative
protocol (KIP-429): members keep their partitions while rejoining; the first round takes
away only what must move, a second round hands it over. Only the moved partitions stop.

A crash costs both protocols the session timeout on the dead member's partitions (nobody
knows it died until then), plus their restore; eager stops everyone else as well, and
``range`` moves more partitions than the sticky assignors, each of which must restore.

What cooperative costs: its moved partitions wait for two rounds, and the second starts
only when the revoking member has rejoined and the others notice at their next heartbeat
(``heartbeat_interval_ms``), and the slow c0 must rejoin in both. So on a join the
*longest* pause is longer under cooperative, even though far fewer partition-seconds are
lost; with few partitions or cheap state (try ``--param partitions=6 --param
restore_ms=0``) eager's brief stop of everything can even cost less in total. The lab says
so, with numbers, whenever a result goes that way.

Kafka references: KIP-429, ``ConsumerRebalanceListener``, ``session.timeout.ms``,
``heartbeat.interval.ms``; Confluent, "Incremental Cooperative Rebalancing in Apache Kafka".

Run it: ``kafkasim scenario run rebalance-protocols --plot-dir pics``.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Optional

from kafkasim.clock import MockClock
from kafkasim.scenarios import _figures as fig
from kafkasim.scenarios._common import (
    START_MS, GroupDriver, check_claim, fmt_assignment, fresh_broker, main_for, table,
)
from kafkasim.scenarios._ownership import OwnershipLog

__all__ = ["PARAMS", "CLAIM", "run"]

CLAIM = ("When a member joins and when one crashes, cooperative-sticky pauses fewer "
         "partition-seconds on average than eager, because only the partitions that move stop.")
"""The lab's point, asserted by :func:`run`."""

PARAMS: dict[str, Any] = {
    "partitions": 12,
    "before": 3,                    # members before the join (the crash starts from before + 1)
    "eager": "range",               # the eager assignor: range or sticky
    "heartbeat_interval_ms": 3000,  # Kafka's default: how soon members learn of a rebalance
    "session_timeout_ms": 10000,    # how long a crashed member goes unnoticed
    "process_ms": 1500,             # time each member spends on one polled batch
    "jitter": 0.5,                  # ... varying by ± this fraction (seeded)
    "slow_ms": 8000,                # c0 takes this long per batch (0 = like the others)
    "restore_ms": 10000,            # a new owner restores a partition's state this long
    "max_poll_records": 20,
    "trials": 5,                    # runs per event and protocol, each with its own timings
}
EVENTS = ("join", "crash")


def _trial(broker, clock: MockClock, assignor: str, event: str, trial: int, cfg: dict,
           rng: random.Random) -> dict:
    group = f"{event}-{assignor}-t{trial}"
    n = cfg["partitions"]
    log = OwnershipLog(clock, cfg["restore_ms"])
    driver = GroupDriver(broker, clock, rng=rng, on_step=log.tick)
    member_cfg = dict(partition_assignment_strategy=[assignor], process_ms=cfg["process_ms"],
                      jitter=cfg["jitter"], heartbeat_interval_ms=cfg["heartbeat_interval_ms"],
                      session_timeout_ms=cfg["session_timeout_ms"],
                      max_poll_records=cfg["max_poll_records"])

    def add(i: int) -> None:
        mc = dict(member_cfg)
        if i == 0 and cfg["slow_ms"]:
            mc["process_ms"] = cfg["slow_ms"]
        m = driver.add(f"c{i}", "events", group, listener=log.listener(f"c{i}"), **mc)
        log.attach(m.name, m.consumer)

    size = cfg["before"] + (1 if event == "crash" else 0)
    for i in range(size):
        add(i)
    driver.run_until_stable(group)
    driver.run(2000 + 100 * rng.randrange(30))   # the event lands at a seeded heartbeat phase
    before = driver.assignments(group)
    gen0 = broker.describe_group(group)["generation"]
    t0 = clock.now_ms()
    log.counting = True
    if event == "join":
        add(size)
    else:
        victim = driver.members[1]
        victim.alive = False
        log.crashed(victim.name)
    took = driver.run_until_stable(group, max_ms=cfg["session_timeout_ms"] + 120_000)
    while log.restoring():
        driver.step()
    driver.run(1000)
    t1 = clock.now_ms()
    log.counting = False
    after = driver.assignments(group)
    gen1 = broker.describe_group(group)["generation"]
    pauses = log.pauses(n, t0, t1)
    spans = log.spans(n, t0 - 2000, t1)
    for m in driver.live(group):
        m.consumer.close()
        m.alive = False
    moved = sorted(p for c, ps in after.items() for p in ps if p not in before.get(c, []))
    return {"assignor": assignor, "event": event, "before": before, "after": after,
            "revoked": {k: sorted(v) for k, v in sorted(log.revoked.items())},
            "revoked_count": sum(len(v) for v in log.revoked.values()),
            "moved_partitions": moved, "rebalance_rounds": gen1 - gen0, "settle_ms": took,
            "paused_partition_seconds": pauses["paused_partition_seconds"],
            "longest_pause_s": pauses["longest_pause_s"],
            "paused_per_partition_s": pauses["per_partition_s"],
            "timeline": {"window_s": round((t1 - t0 + 2000) / 1000, 3), "event_at_s": 2.0,
                         "spans": [list(s) for s in spans]}}


def _mean(rows: list[dict], key: str) -> float:
    return round(sum(r[key] for r in rows) / len(rows), 3)


def run(data_dir: str, *, seed: int = 42, echo: Callable[[str], Any] = print,
        plot_dir: Optional[str] = None, **params: Any) -> dict:
    """Run the lab (see the module docstring); return per event and protocol trials and means."""
    cfg = {**PARAMS, **params}
    clock = MockClock(START_MS)
    assignors = (cfg["eager"], "cooperative-sticky")
    runs: dict[str, dict[str, list[dict]]] = {e: {a: [] for a in assignors} for e in EVENTS}
    with fresh_broker(data_dir, clock) as broker:
        broker.create_topic("events", cfg["partitions"])
        for p in range(cfg["partitions"]):    # enough backlog that every member stays busy
            broker.append_records("events", p, [(clock.now_ms(), b"k", b"v", ())] * 3000)
        for event in EVENTS:
            for t in range(cfg["trials"]):
                for a in assignors:            # both protocols see the same seeded timings
                    runs[event][a].append(_trial(broker, clock, a, event, t, cfg,
                                                 random.Random(f"{seed}:{event}:{t}")))
    summary = {e: {a: {"assignor": a, "protocol": "cooperative" if a == "cooperative-sticky" else "eager",
                       "mean_paused_partition_seconds": _mean(rows, "paused_partition_seconds"),
                       "mean_longest_pause_s": _mean(rows, "longest_pause_s"),
                       "mean_revoked": _mean(rows, "revoked_count"),
                       "rebalance_rounds": sorted({r["rebalance_rounds"] for r in rows}),
                       "trials": rows}
                   for a, rows in runs[e].items()} for e in EVENTS}
    eager, coop = assignors
    echo(f"{cfg['partitions']} partitions; c0 takes {cfg['slow_ms']} ms per batch, the others "
         f"{cfg['process_ms']} ms ± {cfg['jitter']:.0%}; a new owner restores a partition for "
         f"{cfg['restore_ms']} ms; heartbeat every {cfg['heartbeat_interval_ms']} ms, session "
         f"timeout {cfg['session_timeout_ms']} ms; {cfg['trials']} trials per event.\n")
    explanations = []
    for event in EVENTS:
        what = (f"c{cfg['before']} joins {cfg['before']} members" if event == "join"
                else f"c1 of {cfg['before'] + 1} members crashes")
        echo(f"== {event}: {what}")
        for a in assignors:
            r = runs[event][a][0]
            echo(f"{a}, trial 0: before {fmt_assignment(r['before'])}")
            echo(f"{' ' * len(a)}           after  {fmt_assignment(r['after'])}; revoked "
                 f"{_count(r['revoked_count'], 'partition')} in "
                 f"{_count(r['rebalance_rounds'], 'round')}")
        echo(table(["trial", f"{eager}: paused partition-s", "longest pause", "rounds",
                    "cooperative-sticky: paused partition-s", "longest pause", "rounds"],
                   [[t] + [x for a in assignors for x in (
                       f"{runs[event][a][t]['paused_partition_seconds']:.1f}",
                       f"{runs[event][a][t]['longest_pause_s']:.1f} s",
                       runs[event][a][t]["rebalance_rounds"])] for t in range(cfg["trials"])]))
        se, sc = summary[event][eager], summary[event][coop]
        rounds = (f"in {_rounds(sc['rebalance_rounds'])} instead of {_rounds(se['rebalance_rounds'])}"
                  if sc["rebalance_rounds"] != se["rebalance_rounds"]
                  else f"in the same {_rounds(sc['rebalance_rounds'])}")
        echo(f"Mean: cooperative paused {sc['mean_paused_partition_seconds']:.1f} partition-s "
             f"(longest pause {sc['mean_longest_pause_s']:.1f} s) against eager's "
             f"{se['mean_paused_partition_seconds']:.1f} (longest {se['mean_longest_pause_s']:.1f} s); "
             f"it revoked {sc['mean_revoked']:g} instead of {se['mean_revoked']:g} partitions, "
             f"{rounds}.")
        if sc["mean_longest_pause_s"] > se["mean_longest_pause_s"]:
            text = (f"Against the grain: cooperative's longest pause ({sc['mean_longest_pause_s']:.1f} s "
                    f"on average) is longer than eager's ({se['mean_longest_pause_s']:.1f} s). A "
                    f"partition that moves waits through two rounds: it is revoked when the first "
                    f"ends and assigned when the second ends, which needs every member, slow c0 "
                    f"included, to notice (next heartbeat, every {cfg['heartbeat_interval_ms']} ms) "
                    f"and rejoin again; then it is restored ({cfg['restore_ms']} ms). Eager stops "
                    f"everything, but only for one round.")
            explanations.append({"event": event, "trial": None, "text": text})
            echo(text)
        for t in range(cfg["trials"]):
            e, c = runs[event][eager][t], runs[event][coop][t]
            if c["paused_partition_seconds"] > e["paused_partition_seconds"]:
                text = _explain(event, t, e, c, cfg)
                explanations.append({"event": event, "trial": t, "text": text})
                echo(text)
        echo("")
    pictures = _pictures(plot_dir, runs, assignors, cfg) if plot_dir is not None else []
    result = {"claim": CLAIM, "pictures": pictures, "simulated_ms": clock.now_ms() - START_MS,
              "partitions": cfg["partitions"], "restore_ms": cfg["restore_ms"],
              "trials": cfg["trials"], "events": summary, "against_the_claim": explanations}
    for event in EVENTS:
        se, sc = summary[event][eager], summary[event][coop]
        check_claim(sc["mean_paused_partition_seconds"] < se["mean_paused_partition_seconds"], CLAIM,
                    f"{event}: cooperative {sc['mean_paused_partition_seconds']} partition-s, "
                    f"eager {se['mean_paused_partition_seconds']}")
    return result


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _rounds(rounds: list[int]) -> str:
    text = " or ".join(str(r) for r in rounds)
    return f"{text} round{'s' if rounds != [1] else ''}"


def _explain(event: str, t: int, e: dict, c: dict, cfg: dict) -> str:
    """Why cooperative paused longer than eager in this trial, from the trial's numbers."""
    per = c["paused_per_partition_s"]
    worst = max(range(len(per)), key=lambda p: per[p])
    why = (f"In the {event} trial {t}, cooperative paused {c['paused_partition_seconds']:.1f} "
           f"partition-s, more than eager's {e['paused_partition_seconds']:.1f}. Eager stopped "
           f"all partitions, but its longest pause was only {e['longest_pause_s']:.1f} s: the "
           f"barrier closed quickly, since every member, slow c0 included, reached poll() "
           f"soon after the join was announced. Cooperative stopped only {_count(len(c['moved_partitions']), 'partition')}, yet "
           f"partition {worst} waited {c['paused_per_partition_s'][worst]:.1f} s: it moves in a "
           f"second round ({c['rebalance_rounds']} rounds here), which starts only after its old "
           f"owner has revoked it and rejoined, the others notice it at their next heartbeat "
           f"(every {cfg['heartbeat_interval_ms']} ms), and then the new owner restores it "
           f"({cfg['restore_ms']} ms).")
    if event == "crash":
        why += (f" Both protocols also wait {cfg['session_timeout_ms'] / 1000:g} s (the session "
                "timeout) before anyone takes over the crashed member's partitions.")
    return why


def _pictures(plot_dir: str, runs: dict, assignors: tuple, cfg: dict) -> list[str]:
    figure, axes = fig.figure("Who owns each partition, trial 0 (hatched: nobody processes it)",
                              2, 2, size=(14, 8))
    members = [f"c{i}" for i in range(cfg["before"] + 1)]
    for row, event in enumerate(EVENTS):
        for col, a in enumerate(assignors):
            r = runs[event][a][0]
            ev_label = f"c{cfg['before']} joins" if event == "join" else "c1 crashes"
            fig.timeline([f"p{p}" for p in range(cfg["partitions"])],
                         [tuple(s) for s in r["timeline"]["spans"]], ax=axes[2 * row + col],
                         title=f"{event}, {a}: {r['paused_partition_seconds']:.1f} paused "
                               f"partition-s, longest {r['longest_pause_s']:.1f} s",
                         xlabel="time (s)", events=[(r["timeline"]["event_at_s"], ev_label)],
                         owners=members)
    paths = [fig.save(figure, plot_dir, "rebalance-protocols-timeline")]
    figure, axes = fig.figure(f"Paused partition-seconds per trial ({cfg['trials']} trials, "
                              f"restore {cfg['restore_ms']} ms per moved partition)", 1, 2)
    for ax, event in zip(axes, EVENTS):
        fig.grouped([f"trial {t}" for t in range(cfg["trials"])],
                    {a: [r["paused_partition_seconds"] for r in runs[event][a]] for a in assignors},
                    ax=ax, title=f"{event}: paused partition-seconds", xlabel="trial",
                    ylabel="paused partition-seconds (s)")
    paths.append(fig.save(figure, plot_dir, "rebalance-protocols-pauses"))
    return paths


if __name__ == "__main__":
    raise SystemExit(main_for("eager_vs_cooperative"))
