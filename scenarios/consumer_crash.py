"""Lab: a consumer crashes — eviction, takeover from committed offsets, and the zombie.

What you will see
-----------------
Three consumers share a topic's 6 partitions; each loops ``poll → process → commit``
(at-least-once: commit *after* processing). Right after one of them (c2) has
processed a batch, and before it commits, it stops — no more polls, no heartbeats, as
if its process froze. The lab shows:

1. **Eviction**: the coordinator removes c2 once ``session_timeout_ms`` passed
   without a heartbeat (Kafka's default is 45 s; the lab uses 10 s), and the group
   rebalances; c2's partitions had no reader from the crash until the survivors got
   them (the "unowned" time is about the session timeout).
2. **At-least-once**: the survivors resume c2's partitions from the *committed*
   offsets, so the records c2 processed but did not commit are delivered again; every
   record is processed at least once, and the re-delivered count is exactly c2's
   uncommitted batch.
3. **Zombie fencing**: c2 wakes up and tries to commit what it processed. The
   coordinator no longer knows its member id, so the commit is rejected and the
   client raises ``CommitFailedError`` — a zombie cannot overwrite the new owners'
   progress.

Kafka references: consumer configs ``session.timeout.ms``, ``heartbeat.interval.ms``,
``enable.auto.commit``; ``CommitFailedException`` ("the group has already rebalanced and
assigned the partitions to another member"); Kafka docs "Consumer position" and
delivery semantics.

The pictures: the ownership timeline (the victim's partitions have no reader from the
crash to the takeover) and a grid of how many times each record was processed (2 = the
re-delivered ones).

Run it: ``kafkasim scenario run consumer-crash --plot-dir pics``.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, Callable, Optional

from kafkasim.clock import MockClock
from kafkasim.errors import CommitFailedError, InvalidArgumentError
from kafkasim.scenarios import _figures as fig
from kafkasim.scenarios._common import (
    START_MS, GroupDriver, check_claim, fmt_assignment, fresh_broker, main_for, table,
)
from kafkasim.scenarios._ownership import OwnershipLog
from kafkasim.types import TopicPartition

__all__ = ["PARAMS", "CLAIM", "run", "fmt_records"]

CLAIM = ("A crashed member is evicted after the session timeout, exactly its uncommitted "
         "records are delivered again to the survivors, and its late commit is rejected.")
"""The lab's point, asserted by :func:`run`."""

PARAMS: dict[str, Any] = {
    "partitions": 6,
    "consumers": 3,
    "records_per_partition": 40,
    "session_timeout_ms": 10_000,
    "heartbeat_interval_ms": 3_000,
    "process_ms": 400,
    "max_poll_records": 4,
    "assignor": "range",
}


def fmt_records(records) -> str:
    """``[(partition, offset)]`` as text: ``partition 4 offsets 12-15, partition 5 offset 3``."""
    by_p: dict[int, list[int]] = {}
    for p, o in sorted(records):
        by_p.setdefault(p, []).append(o)
    parts = []
    for p, offs in by_p.items():
        runs, start, prev = [], offs[0], offs[0]
        for o in offs[1:] + [None]:
            if o is not None and o == prev + 1:
                prev = o
                continue
            runs.append(f"{start}-{prev}" if prev > start else f"{start}")
            if o is not None:
                start = prev = o
        word = "offsets" if len(offs) > 1 else "offset"
        parts.append(f"partition {p} {word} {', '.join(runs)}")
    return ", ".join(parts) or "none"


def run(data_dir: str, *, seed: int = 42, echo: Callable[[str], Any] = print,
        plot_dir: Optional[str] = None, **params: Any) -> dict:
    """Run the lab (see the module docstring); return eviction, re-delivery and fencing facts."""
    cfg = {**PARAMS, **params}
    n = cfg["partitions"]
    if cfg["consumers"] < 2:
        raise InvalidArgumentError(f"consumer-crash needs at least 2 consumers (one crashes, "
                                   f"the others take over), got consumers={cfg['consumers']}")
    rng = random.Random(seed)
    clock = MockClock(START_MS)
    group = "workers"
    with fresh_broker(data_dir, clock) as broker:
        broker.create_topic("jobs", n)
        for p in range(n):
            broker.append_records("jobs", p, [(clock.now_ms(), f"job-{p}-{i}".encode(), b"work", ())
                                              for i in range(cfg["records_per_partition"])])
        log = OwnershipLog(clock)
        driver = GroupDriver(broker, clock, rng=rng, on_step=log.tick)
        names = [f"c{i}" for i in range(cfg["consumers"])]
        for name in names:
            m = driver.add(name, "jobs", group, process_ms=cfg["process_ms"], jitter=0.5,
                           session_timeout_ms=cfg["session_timeout_ms"],
                           heartbeat_interval_ms=cfg["heartbeat_interval_ms"],
                           max_poll_records=cfg["max_poll_records"],
                           partition_assignment_strategy=[cfg["assignor"]],
                           listener=log.listener(name))
            log.attach(name, m.consumer)
        driver.run_until_stable(group)
        driver.run(1000 + 100 * rng.randrange(20))
        before = driver.assignments(group)
        gen_before = broker.describe_group(group)["generation"]
        victim = driver.members[-1]
        # crash right after the victim processed a batch, before it commits it
        while not victim.pending_commit:
            driver.step()
        victim.alive = False
        crash_ms = clock.now_ms()
        uncommitted = [(p, o) for p, o, _ in victim.processed
                       if o >= (victim.consumer.committed(TopicPartition("jobs", p)) or 0)]
        log.crashed(victim.name)

        evicted_ms = None
        while evicted_ms is None:
            driver.step()
            members = broker.describe_group(group)["members"]
            if not any(m["member_id"] == victim.consumer.member_id for m in members):
                evicted_ms = clock.now_ms()
        driver.run_until_stable(group)
        after = driver.assignments(group)
        gen_after = broker.describe_group(group)["generation"]
        total = n * cfg["records_per_partition"]
        for _ in range(10_000):                 # until everything is processed and committed
            done = {(p, o) for m in driver.members for p, o, _ in m.processed}
            if len(done) == total and not any(m.pending_commit for m in driver.live()):
                break
            driver.step()
        else:
            check_claim(False, CLAIM, f"the survivors did not finish the topic: {len(done)} of "
                                      f"{total} records processed")
        end_ms = clock.now_ms()
        pauses = log.pauses(n, crash_ms, end_ms)

        # the zombie wakes up and commits what it processed
        try:
            victim.consumer.commit()
            zombie = {"commit_rejected": False, "error": None, "message": None}
        except CommitFailedError as exc:
            zombie = {"commit_rejected": True, "error": type(exc).__name__, "message": str(exc)}
        committed = broker.offset_fetch(group)

    counts = Counter((p, o) for m in driver.members for p, o, _ in m.processed)
    redelivered = sorted(k for k, c in counts.items() if c > 1)
    times = [[counts.get((p, o), 0) for o in range(cfg["records_per_partition"])] for p in range(n)]
    result = {
        "claim": CLAIM, "pictures": [],
        "partitions": n, "records": total, "session_timeout_ms": cfg["session_timeout_ms"],
        "victim": victim.name, "victim_partitions": before[victim.name],
        "assignment_before": before, "assignment_after": after,
        "generations": [gen_before, gen_after],
        "evicted_after_ms": evicted_ms - crash_ms,
        "unowned_partition_seconds": pauses["paused_partition_seconds"],
        "longest_pause_s": pauses["longest_pause_s"],
        "victim_uncommitted": len(uncommitted),
        "redelivered": len(redelivered),
        "redelivered_records": [[p, o] for p, o in redelivered],
        "every_record_processed": len(counts) == total,
        "processed_per_member": {m.name: len(m.processed) for m in driver.members},
        "times_processed": times,
        "committed_end": all(committed[TopicPartition("jobs", p)].offset == cfg["records_per_partition"]
                             for p in range(n)),
        "zombie_commit": zombie,
    }
    echo(f"{cfg['consumers']} consumers, {n} partitions of {cfg['records_per_partition']} records, "
         f"session timeout {cfg['session_timeout_ms']} ms, heartbeat every "
         f"{cfg['heartbeat_interval_ms']} ms, assignor {cfg['assignor']}.\n")
    echo(table(["", "generation", "who owns what"],
               [["before the crash", gen_before, fmt_assignment(before)],
                ["after the eviction", gen_after, fmt_assignment(after)]]))
    echo(f"\n{victim.name} froze after processing {len(uncommitted)} records it had not "
         f"committed ({fmt_records(uncommitted)}).")
    echo(f"The coordinator evicted it {result['evicted_after_ms']:,} ms after the crash: no "
         f"heartbeat for the session timeout ({cfg['session_timeout_ms']:,} ms) since its last "
         f"one. Its partitions had no reader meanwhile: {pauses['paused_partition_seconds']:.1f} "
         f"partition-seconds in all, {pauses['longest_pause_s']:.1f} s at most for one partition.")
    echo(f"The survivors resumed from the committed offsets and processed {len(redelivered)} "
         f"records a second time ({fmt_records(redelivered)}): at-least-once delivery. "
         + ("Every record was processed." if result["every_record_processed"]
            else "Some records were never processed!"))
    if zombie["commit_rejected"]:
        echo(f"When {victim.name} woke up, its commit was rejected ({zombie['error']}): "
             f"{zombie['message']}")
    else:
        echo(f"When {victim.name} woke up, its commit was accepted: the claim does not hold.")
    result["simulated_ms"] = clock.now_ms() - START_MS
    start = crash_ms - 3000
    result["timeline"] = {"from": "3 s before the crash", "crash_at_s": 3.0,
                          "evicted_at_s": (evicted_ms - start) / 1000,
                          "spans": [list(x) for x in log.spans(n, start, end_ms)]}
    if plot_dir is not None:
        result["pictures"] = _pictures(plot_dir, result, cfg)
    timeout, hb = cfg["session_timeout_ms"], cfg["heartbeat_interval_ms"]
    check_claim(timeout - hb <= result["evicted_after_ms"] <= timeout + driver.step_ms
                and victim.name not in after and 0 < len(uncommitted) == len(redelivered)
                and set(redelivered) == set(uncommitted) and result["every_record_processed"]
                and result["committed_end"] and zombie["commit_rejected"], CLAIM,
                f"evicted after {result['evicted_after_ms']} ms, uncommitted {len(uncommitted)}, "
                f"re-delivered {len(redelivered)}, zombie commit rejected {zombie['commit_rejected']}")
    return result


def _pictures(plot_dir: str, r: dict, cfg: dict) -> list[str]:
    n, tl = cfg["partitions"], r["timeline"]
    figure, axes = fig.figure(f"{r['victim']} crashes: its partitions wait for the session "
                              f"timeout, then its uncommitted records are processed again",
                              1, 2, size=(15, 5.5))
    fig.timeline([f"p{p}" for p in range(n)], [tuple(x) for x in tl["spans"]], ax=axes[0],
                 title="who owns each partition", xlabel="time since 3 s before the crash (s)",
                 events=[(tl["crash_at_s"], f"{r['victim']} crashes"),
                         (tl["evicted_at_s"], "evicted")],
                 owners=[f"c{i}" for i in range(cfg["consumers"])])
    fig.grid(r["times_processed"], [f"p{p}" for p in range(n)],
             [str(o) for o in range(cfg["records_per_partition"])], ax=axes[1],
             title="times each record was processed (2 = re-delivered)", xlabel="offset",
             ylabel="partition", colourbar="times processed", annotate=False, cmap="Oranges")
    return [fig.save(figure, plot_dir, "consumer-crash")]


if __name__ == "__main__":
    raise SystemExit(main_for("consumer_crash"))
