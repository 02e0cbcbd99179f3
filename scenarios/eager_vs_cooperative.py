"""Lab: rebalance protocols — eager, cooperative-sticky and Kafka 4's consumer protocol (KIP-848).

What you will see
-----------------
A group reads a topic (12 partitions) with a **stateful** app: each partition has state (a
Kafka Streams task's store) that a *new* owner must restore before it can process the
partition (``restore_ms``, 10 s: replaying a changelog); a partition that returns to its
previous owner (the same member name: the same host and disk) keeps its local state. Each
member loops ``poll → process → commit``; c0 is slow (``slow_ms`` per batch, the others
``process_ms`` ± ``jitter``). Three events, each run ``trials`` times with seeded timings,
under three protocols side by side: the classic protocol with an **eager** assignor
(``range`` by default, or ``sticky``), the classic protocol with **cooperative-sticky**, and
the **consumer** protocol (KIP-848, ``group.protocol=consumer``) with the broker's
``uniform`` assignor:

- **join**: 3 members, a 4th joins;
- **crash**: 4 members, c1 stops (no more polls or heartbeats); the coordinator evicts it
  after the session timeout (10 s here; Kafka's default is 45 s);
- **rolling-restart**: 6 members, restarted one at a time as a deployment does: each member
  closes (it leaves the group), its process is down for ``restart_ms``, a new member with the
  same name starts, and the next member is restarted only once the group is stable again and
  every partition is processed again. The members are **dynamic** (no ``group.instance.id``,
  Kafka's default and what most consumer apps run), so every restart is a leave and a join.
  With ``--param static=true`` every member has a ``group.instance.id`` (static membership,
  KIP-345): a member back within the session timeout (``--param restart_ms=5000``) takes
  back its own partitions without a rebalance under every protocol, and the three pause
  alike; one that stays down longer is removed all the same.

For each run the lab measures, from the event until every partition is processed again,
the **paused partition-seconds** (for every partition, the time nobody processed it —
without an owner or restoring — summed), the **longest pause** of one partition, and the
**round trips**: the assignments the members received, summed over members. A classic round
trip is one completed JoinGroup+SyncGroup pair of one member (every member takes part in
every round); a consumer-protocol round trip is one heartbeat whose response carried a
changed assignment for that member (plus the heartbeat acknowledging it). The lab also
counts the rebalance rounds (classic generations, or KIP-848 group epochs). The timeline
picture shows who owned each partition when; the bar chart compares the three protocols.

The consumer protocol's heartbeat interval and session timeout are the broker's
(``group.consumer.heartbeat.interval.ms``, ``group.consumer.session.timeout.ms``): the lab
sets them to the classic members' ``heartbeat_interval_ms`` and ``session_timeout_ms`` (and
lowers the ``group.consumer.min.*`` bounds to allow it), so all three protocols learn of a
change and notice a crash equally fast.

Why
---
Eager protocol (Kafka's classic rebalance): every member revokes **all** its partitions at
its next ``poll()`` and rejoins; the JoinGroup barrier waits for the slowest member (c0
finishing its batch), so every partition stops: a stop-the-world pause. Cooperative
protocol (KIP-429): members keep their partitions while rejoining; the first round takes
away only what must move, a second round hands it over. Only the moved partitions stop.

Consumer protocol (KIP-848): the broker computes the assignment and hands each member its
part in a heartbeat; there is no JoinGroup barrier and no group-wide round. A member
releases a partition at its next heartbeat, and the new owner gets it at its own next
heartbeat: nobody waits for the slow c0 unless c0 is the one giving the partition up. A
rolling restart with dynamic members is two rebalances per restarted member (a leave, a
join): cooperative pays two JoinGroup rounds each time, each waiting for c0 to finish its
batch, and then a restore; the consumer protocol pays a heartbeat or two and the restore.

How long a restart takes matters. With ``--param restart_ms=5000`` cooperative pauses
*less*: a dynamic member back within 5 s rejoins while the rebalance its leave started is
still waiting at the JoinGroup barrier for c0, so the sticky assignor hands its partitions
straight back to it, state kept, nothing restored; the consumer protocol has already given
them to the others at their next heartbeat (a restore each) and moves partitions again when
the new member joins (another restore). The default, 15 s, is a process or pod restart that
outlasts a classic rebalance (stop, start, first poll); in this setup the crossover lies
between 5 and 8 s. The lab explains, with numbers, every trial the consumer protocol loses.

A crash costs every protocol the session timeout on the dead member's partitions (nobody
knows it died until then), plus their restore; eager stops everyone else as well, and
``range`` moves more partitions than the sticky assignors, each of which must restore.

What cooperative costs: its moved partitions wait for two rounds, and the second starts
only when the revoking member has rejoined and the others notice at their next heartbeat
(``heartbeat_interval_ms``), and the slow c0 must rejoin in both. So on a join the
*longest* pause is longer under cooperative, even though far fewer partition-seconds are
lost; with few partitions or cheap state (try ``--param partitions=6 --param
restore_ms=0``) eager's brief stop of everything can even cost less in total. The lab says
so, with numbers, whenever a result goes that way.

One difference from Java: kafkasim's in-process consumer-protocol member reconciles inside
its heartbeat, so its rebalance callbacks run then; the Java client runs them on the
application thread at its next ``poll()``, so a busy member's revocation waits for its
batch to end (for the partitions *it* gives up; nobody else waits).

Kafka references: KIP-429, KIP-848 ("The Next Generation of the Consumer Rebalance
Protocol"), KIP-345 (static membership), ``ConsumerRebalanceListener``,
``session.timeout.ms``, ``heartbeat.interval.ms``, ``group.consumer.heartbeat.interval.ms``;
Confluent, "Incremental Cooperative Rebalancing in Apache Kafka"; Kafka's documentation,
"Consumer Rebalance Protocol".

Run it: ``kafkasim scenario run rebalance-protocols --plot-dir pics``.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Optional

from kafkasim.clock import MockClock
from kafkasim.errors import InvalidArgumentError
from kafkasim.scenarios import _figures as fig
from kafkasim.scenarios._common import (
    lab_clock,
    START_MS, GroupDriver, check_claim, fmt_assignment, fresh_broker, main_for, table,
)
from kafkasim.scenarios._ownership import OwnershipLog

__all__ = ["PARAMS", "CLAIM", "run"]

CLAIM = ("When a member joins and when one crashes, cooperative-sticky pauses fewer "
         "partition-seconds on average than eager, because only the partitions that move stop; "
         "on a rolling restart, Kafka 4's consumer protocol (KIP-848) pauses fewer "
         "partition-seconds on average than cooperative-sticky, because no JoinGroup barrier "
         "makes the moved partitions wait for the slowest member.")
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
    "restart_members": 6,           # the rolling restart's group size
    "restart_ms": 15000,            # a restarted member's process is down this long (stop, start, first poll)
    "static": False,                # members have a group.instance.id (KIP-345)
    "trials": 5,                    # runs per event and protocol, each with its own timings
}
EVENTS = ("join", "crash", "rolling-restart")
CONSUMER_ASSIGNOR = "uniform"
"""The consumer protocol's server assignor (``group.remote.assignor``; Kafka's default)."""


def _protocols(cfg: dict) -> tuple[tuple[str, str], ...]:
    """``(assignor, protocol)`` of the three columns, in the order they are shown."""
    return ((cfg["eager"], "eager"), ("cooperative-sticky", "cooperative"),
            (CONSUMER_ASSIGNOR, "consumer"))


def _broker_configs(cfg: dict) -> dict[str, int]:
    """The consumer protocol's broker-side timers, set to the classic members' values."""
    hb, session = cfg["heartbeat_interval_ms"], cfg["session_timeout_ms"]
    return {"group.consumer.heartbeat.interval.ms": hb, "group.consumer.min.heartbeat.interval.ms": hb,
            "group.consumer.max.heartbeat.interval.ms": max(hb, 15_000),
            "group.consumer.session.timeout.ms": session,
            "group.consumer.min.session.timeout.ms": session,
            "group.consumer.max.session.timeout.ms": max(session, 60_000)}


def _member_config(assignor: str, protocol: str, cfg: dict) -> dict:
    common = dict(process_ms=cfg["process_ms"], jitter=cfg["jitter"],
                  max_poll_records=cfg["max_poll_records"])
    if protocol == "consumer":       # timeouts are the broker's (group.consumer.*)
        return dict(common, group_protocol="consumer", group_remote_assignor=assignor)
    return dict(common, partition_assignment_strategy=[assignor],
                heartbeat_interval_ms=cfg["heartbeat_interval_ms"],
                session_timeout_ms=cfg["session_timeout_ms"])


def _group_size(event: str, cfg: dict) -> int:
    return {"join": cfg["before"], "crash": cfg["before"] + 1,
            "rolling-restart": cfg["restart_members"]}[event]


def _trial(broker, clock: MockClock, assignor: str, protocol: str, event: str, trial: int,
           cfg: dict, seed: int) -> dict:
    rng = random.Random(f"{seed}:{event}:{trial}")   # every protocol sees the same timings
    group = f"{event}-{assignor}-t{trial}"
    n = cfg["partitions"]
    log = OwnershipLog(clock, cfg["restore_ms"])
    driver = GroupDriver(broker, clock, rng=rng, on_step=log.tick)
    member_cfg = _member_config(assignor, protocol, cfg)
    started = [0]

    def add(i: int) -> None:
        mc = dict(member_cfg)
        if i == 0 and cfg["slow_ms"]:
            mc["process_ms"] = cfg["slow_ms"]
        if protocol == "consumer":    # a reproducible member id per started process
            mc["seed"] = f"{seed}:{event}:{trial}:{started[0]}"
        if cfg["static"]:
            mc["group_instance_id"] = f"c{i}"
        started[0] += 1
        m = driver.add(f"c{i}", "events", group, listener=log.listener(f"c{i}"), **mc)
        log.attach(m.name, m.consumer)

    def settle(max_ms: int = 120_000) -> int:
        took = driver.run_until_stable(group, max_ms=max_ms)
        while log.restoring():
            driver.step()
        return took

    size = _group_size(event, cfg)
    for i in range(size):
        add(i)
    settle()                          # formed, and every first owner done restoring
    driver.run(2000 + 100 * rng.randrange(30))   # the event lands at a seeded heartbeat phase
    before = driver.assignments(group)
    gen0 = broker.describe_group(group)["generation"]
    t0 = clock.now_ms()
    log.counting = True
    if event == "join":
        add(size)
        took = settle()
    elif event == "crash":
        victim = driver.members[1]
        victim.alive = False
        log.crashed(victim.name)
        took = settle(cfg["session_timeout_ms"] + 120_000)
    else:
        took = 0
        for i in range(size):        # one at a time, the next once the group is stable again
            member = next(m for m in driver.live(group) if m.name == f"c{i}")
            member.consumer.close()
            member.alive = False
            log.crashed(member.name)  # its process is down: nobody processes what it had
            driver.run(cfg["restart_ms"])
            add(i)
            took += settle(cfg["session_timeout_ms"] + 120_000)
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
    return {"assignor": assignor, "protocol": protocol, "event": event, "before": before,
            "after": after,
            "revoked": {k: sorted(v) for k, v in sorted(log.revoked.items())},
            "revoked_count": sum(len(v) for v in log.revoked.values()),
            "moved_partitions": moved, "rebalance_rounds": gen1 - gen0, "settle_ms": took,
            "round_trips": sum(log.assignments_received.values()), "restores": log.restores,
            "round_trips_per_member": dict(sorted(log.assignments_received.items())),
            "paused_partition_seconds": pauses["paused_partition_seconds"],
            "longest_pause_s": pauses["longest_pause_s"],
            "paused_per_partition_s": pauses["per_partition_s"],
            "timeline": {"window_s": round((t1 - t0 + 2000) / 1000, 3), "event_at_s": 2.0,
                         "spans": [list(s) for s in spans]}}


def _mean(rows: list[dict], key: str) -> float:
    return round(sum(r[key] for r in rows) / len(rows), 3)


def _what(event: str, cfg: dict) -> str:
    if event == "join":
        return f"c{cfg['before']} joins {cfg['before']} members"
    if event == "crash":
        return f"c1 of {cfg['before'] + 1} members crashes"
    kind = "static" if cfg["static"] else "dynamic"
    return (f"{cfg['restart_members']} {kind} members restarted one at a time, each down "
            f"{cfg['restart_ms']} ms")


def run(data_dir: str, *, seed: int = 42, echo: Callable[[str], Any] = print,
        plot_dir: Optional[str] = None, **params: Any) -> dict:
    """Run the lab (see the module docstring); return per event and protocol trials and means."""
    cfg = {**PARAMS, **params}
    if cfg["restart_members"] < 2 or cfg["restart_ms"] < 0:
        raise InvalidArgumentError(
            f"restart_members={cfg['restart_members']}, restart_ms={cfg['restart_ms']}: a rolling "
            "restart needs at least 2 members (someone to take over) and a restart_ms >= 0")
    clock = lab_clock()
    protocols = _protocols(cfg)
    assignors = tuple(a for a, _ in protocols)
    runs: dict[str, dict[str, list[dict]]] = {e: {a: [] for a in assignors} for e in EVENTS}
    with fresh_broker(data_dir, clock, _broker_configs(cfg)) as broker:
        broker.create_topic("events", cfg["partitions"])
        for p in range(cfg["partitions"]):    # enough backlog that every member stays busy
            broker.append_records("events", p, [(clock.now_ms(), b"k", b"v", ())] * 3000)
        for event in EVENTS:
            for t in range(cfg["trials"]):
                for a, protocol in protocols:
                    runs[event][a].append(_trial(broker, clock, a, protocol, event, t, cfg, seed))
    summary = {e: {a: {"assignor": a, "protocol": protocol,
                       "mean_paused_partition_seconds": _mean(runs[e][a], "paused_partition_seconds"),
                       "mean_longest_pause_s": _mean(runs[e][a], "longest_pause_s"),
                       "mean_revoked": _mean(runs[e][a], "revoked_count"),
                       "mean_round_trips": _mean(runs[e][a], "round_trips"),
                       "rebalance_rounds": sorted({r["rebalance_rounds"] for r in runs[e][a]}),
                       "trials": runs[e][a]}
                   for a, protocol in protocols} for e in EVENTS}
    eager, coop, kip848 = assignors
    echo(f"{cfg['partitions']} partitions; c0 takes {cfg['slow_ms']} ms per batch, the others "
         f"{cfg['process_ms']} ms ± {cfg['jitter']:.0%}; a new owner restores a partition for "
         f"{cfg['restore_ms']} ms; heartbeat every {cfg['heartbeat_interval_ms']} ms, session "
         f"timeout {cfg['session_timeout_ms']} ms (the consumer protocol's broker-side "
         f"group.consumer.* set to the same); {cfg['trials']} trials per event. Round trips: the "
         f"assignments members received, one per member per classic JoinGroup+SyncGroup round, "
         f"one per KIP-848 heartbeat that changed a member's assignment.\n")
    explanations = []
    for event in EVENTS:
        echo(f"== {event}: {_what(event, cfg)}")
        width = max(len(_label(a, p)) for a, p in protocols)
        for a, protocol in protocols:
            r = runs[event][a][0]
            label = _label(a, protocol)
            echo(f"{label + ',':<{width + 1}} trial 0: before {fmt_assignment(r['before'])}")
            echo(f"{' ' * (width + 11)}after  {fmt_assignment(r['after'])}; revoked "
                 f"{_count(r['revoked_count'], 'partition')} in "
                 f"{_count(r['rebalance_rounds'], 'round')}, {_count(r['round_trips'], 'round trip')}")
        echo(table(["trial", "protocol", "paused partition-s", "longest pause", "rounds", "round trips",
                    "restores"],
                   [[t, _label(a, p), f"{runs[event][a][t]['paused_partition_seconds']:.1f}",
                     f"{runs[event][a][t]['longest_pause_s']:.1f} s",
                     runs[event][a][t]["rebalance_rounds"], runs[event][a][t]["round_trips"],
                     runs[event][a][t]["restores"]]
                    for t in range(cfg["trials"]) for a, p in protocols]))
        se, sc, sk = (summary[event][a] for a in assignors)
        rounds = (f"in {_rounds(sc['rebalance_rounds'])} instead of {_rounds(se['rebalance_rounds'])}"
                  if sc["rebalance_rounds"] != se["rebalance_rounds"]
                  else f"in the same {_rounds(sc['rebalance_rounds'])}")
        echo(f"Mean: cooperative paused {sc['mean_paused_partition_seconds']:.1f} partition-s "
             f"(longest pause {sc['mean_longest_pause_s']:.1f} s) against eager's "
             f"{se['mean_paused_partition_seconds']:.1f} (longest {se['mean_longest_pause_s']:.1f} s); "
             f"it revoked {sc['mean_revoked']:g} instead of {se['mean_revoked']:g} partitions, "
             f"{rounds}.")
        echo(f"Mean: the consumer protocol ({kip848}) paused {sk['mean_paused_partition_seconds']:.1f} "
             f"partition-s (longest pause {sk['mean_longest_pause_s']:.1f} s) in "
             f"{sk['mean_round_trips']:g} round trips, against cooperative's "
             f"{sc['mean_paused_partition_seconds']:.1f} (longest {sc['mean_longest_pause_s']:.1f} s) "
             f"in {sc['mean_round_trips']:g} and eager's {se['mean_paused_partition_seconds']:.1f} "
             f"in {se['mean_round_trips']:g}.")
        if event != "rolling-restart" and sc["mean_longest_pause_s"] > se["mean_longest_pause_s"]:
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
            e, c, k = (runs[event][a][t] for a in assignors)
            if event != "rolling-restart" and c["paused_partition_seconds"] > e["paused_partition_seconds"]:
                text = _explain(event, t, e, c, cfg)
                explanations.append({"event": event, "trial": t, "text": text})
                echo(text)
            if k["paused_partition_seconds"] >= c["paused_partition_seconds"]:
                text = _explain_kip848(event, t, c, k, cfg)
                explanations.append({"event": event, "trial": t, "text": text})
                echo(text)
        echo("")
    pictures = _pictures(plot_dir, runs, protocols, cfg) if plot_dir is not None else []
    result = {"claim": CLAIM, "pictures": pictures, "simulated_ms": clock.now_ms() - START_MS,
              "partitions": cfg["partitions"], "restore_ms": cfg["restore_ms"],
              "static": cfg["static"], "trials": cfg["trials"], "events": summary,
              "against_the_claim": explanations}
    for event in ("join", "crash"):
        se, sc = summary[event][eager], summary[event][coop]
        check_claim(sc["mean_paused_partition_seconds"] < se["mean_paused_partition_seconds"], CLAIM,
                    f"{event}: cooperative {sc['mean_paused_partition_seconds']} partition-s, "
                    f"eager {se['mean_paused_partition_seconds']}")
    sc, sk = summary["rolling-restart"][coop], summary["rolling-restart"][kip848]
    check_claim(sk["mean_paused_partition_seconds"] < sc["mean_paused_partition_seconds"], CLAIM,
                f"rolling-restart: consumer protocol {sk['mean_paused_partition_seconds']} "
                f"partition-s, cooperative {sc['mean_paused_partition_seconds']}")
    return result


def _label(assignor: str, protocol: str) -> str:
    return f"consumer ({assignor})" if protocol == "consumer" else assignor


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


def _explain_kip848(event: str, t: int, c: dict, k: dict, cfg: dict) -> str:
    """Why the consumer protocol did not pause less than cooperative in this trial."""
    why = (f"In the {event} trial {t}, the consumer protocol paused {k['paused_partition_seconds']:.1f} "
           f"partition-s, not less than cooperative's {c['paused_partition_seconds']:.1f}; its new "
           f"owners restored {_count(k['restores'], 'partition')} ({cfg['restore_ms']} ms each), "
           f"cooperative's {c['restores']}.")
    if cfg["static"] and event == "rolling-restart" and cfg["restart_ms"] < cfg["session_timeout_ms"]:
        why += (" With static members (group.instance.id) a member restarted within the session "
                "timeout takes back its own partitions without a rebalance under every protocol: "
                "each pause is the restart itself, which no protocol can shorten.")
    elif cfg["static"] and event == "rolling-restart":
        why += (f" The restart ({cfg['restart_ms']} ms) outlasted the session timeout "
                f"({cfg['session_timeout_ms']} ms): each static member was removed before it came "
                f"back, so every restart was a leave and a join after all, later than a dynamic "
                f"member's; static membership needs a session timeout longer than a restart.")
    elif event == "rolling-restart":
        why += (f" Each restarted member was down only {cfg['restart_ms']} ms: under cooperative it "
                f"came back while the rebalance its leave had started was still waiting at the "
                f"JoinGroup barrier (for slow c0 to finish its batch), so the sticky assignor handed "
                f"its partitions straight back to it, state kept, nothing restored. The consumer "
                f"protocol has no barrier to wait at: it gave the leaver's partitions to the others "
                f"at their next heartbeat (a restore each), and moved partitions again to the new "
                f"member when it joined (another restore). Static membership (--param static=true) "
                f"keeps a restarting member's partitions for it under every protocol.")
    elif event == "crash":
        why += (f" Every protocol waits {cfg['session_timeout_ms'] / 1000:g} s (the session "
                "timeout) before anyone takes over the crashed member's partitions.")
    return why


def _pictures(plot_dir: str, runs: dict, protocols: tuple, cfg: dict) -> list[str]:
    figure, axes = fig.figure("Who owns each partition, trial 0 (hatched: nobody processes it)",
                              len(EVENTS), len(protocols), size=(21, 13))
    members = [f"c{i}" for i in range(max(cfg["before"] + 1, cfg["restart_members"]))]
    for row, event in enumerate(EVENTS):
        for col, (a, protocol) in enumerate(protocols):
            r = runs[event][a][0]
            ev_label = {"join": f"c{cfg['before']} joins", "crash": "c1 crashes",
                        "rolling-restart": "c0 restarts first"}[event]
            fig.timeline([f"p{p}" for p in range(cfg["partitions"])],
                         [tuple(s) for s in r["timeline"]["spans"]], ax=axes[len(protocols) * row + col],
                         title=f"{event}, {_label(a, protocol)}:\n{r['paused_partition_seconds']:.1f} "
                               f"paused partition-s, longest {r['longest_pause_s']:.1f} s, "
                               f"{r['round_trips']} round trips",
                         xlabel="time (s)", events=[(r["timeline"]["event_at_s"], ev_label)],
                         owners=members)
    paths = [fig.save(figure, plot_dir, "rebalance-protocols-timeline")]
    figure, axes = fig.figure(f"Eager, cooperative and the consumer protocol (KIP-848), mean of "
                              f"{cfg['trials']} trials (restore {cfg['restore_ms']} ms per moved "
                              f"partition)", 1, 3, size=(16, 5.6))
    metrics = (("mean_paused_partition_seconds", "paused partition-seconds", "partition-seconds (s)"),
               ("mean_longest_pause_s", "longest pause of one partition", "seconds (s)"),
               ("mean_round_trips", "round trips (assignments received)", "round trips (count)"))
    for ax, (key, title, ylabel) in zip(axes, metrics):
        fig.grouped(list(EVENTS),
                    {_label(a, p): [_mean(runs[e][a], key.removeprefix("mean_")) for e in EVENTS]
                     for a, p in protocols},
                    ax=ax, title=title, xlabel="event", ylabel=ylabel)
    paths.append(fig.save(figure, plot_dir, "rebalance-protocols-pauses"))
    return paths


if __name__ == "__main__":
    raise SystemExit(main_for("eager_vs_cooperative"))
