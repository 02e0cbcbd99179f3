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

Run it: ``kafkasim scenario run consumer_crash``.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, Callable, Optional

from kafkasim.clock import MockClock
from kafkasim.errors import CommitFailedError
from kafkasim.types import TopicPartition
from kafkasim.scenarios._common import START_MS, GroupDriver, OwnershipClock, fresh_broker, main_for, table

__all__ = ["PARAMS", "CLAIM", "run"]

CLAIM = ("A crashed member is evicted after the session timeout, its uncommitted records are delivered again to the survivors, and its late commit is rejected.")
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


def run(data_dir: str, *, seed: int = 42, echo: Callable[[str], Any] = print,
        plot_dir: Optional[str] = None, **params: Any) -> dict:
    """Run the lab (see the module docstring); return eviction, re-delivery and fencing facts."""
    cfg = {**PARAMS, **params}
    n = cfg["partitions"]
    rng = random.Random(seed)
    clock = MockClock(START_MS)
    group = "workers"
    with fresh_broker(data_dir, clock) as broker:
        broker.create_topic("jobs", n)
        for p in range(n):
            broker.append_records("jobs", p, [(clock.now_ms(), f"job-{p}-{i}".encode(), b"work", ())
                                              for i in range(cfg["records_per_partition"])])
        driver = GroupDriver(broker, clock, rng=rng)
        pauses = OwnershipClock(clock)
        names = [f"c{i}" for i in range(cfg["consumers"])]
        for name in names:
            driver.add(name, "jobs", group, process_ms=cfg["process_ms"], jitter=0.5,
                       session_timeout_ms=cfg["session_timeout_ms"],
                       heartbeat_interval_ms=cfg["heartbeat_interval_ms"],
                       max_poll_records=cfg["max_poll_records"],
                       partition_assignment_strategy=[cfg["assignor"]],
                       listener=pauses.for_member(name))
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
        pauses.counting = True
        pauses.mark_unowned(victim.name, sorted(victim.consumer.assignment()))   # from now on

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
            raise AssertionError(f"the survivors did not finish the topic: {len(done)} of {total}")
        pauses.counting = False

        # the zombie wakes up and commits what it processed
        try:
            victim.consumer.commit()
            zombie = {"commit_rejected": False, "error": None, "message": None}
        except CommitFailedError as exc:
            zombie = {"commit_rejected": True, "error": type(exc).__name__, "message": str(exc)}
        committed = broker.offset_fetch(group)

    counts = Counter((p, o) for m in driver.members for p, o, _ in m.processed)
    redelivered = sorted(k for k, c in counts.items() if c > 1)
    result = {
        "partitions": n, "records": total, "session_timeout_ms": cfg["session_timeout_ms"],
        "victim": victim.name, "victim_partitions": before[victim.name],
        "assignment_before": before, "assignment_after": after,
        "generations": [gen_before, gen_after],
        "evicted_after_ms": evicted_ms - crash_ms,
        "unowned_partition_seconds": round(pauses.paused_ms / 1000.0, 3),
        "victim_uncommitted": len(uncommitted),
        "redelivered": len(redelivered),
        "redelivered_records": [[p, o] for p, o in redelivered],
        "every_record_processed": len(counts) == total,
        "processed_per_member": {m.name: len(m.processed) for m in driver.members},
        "committed_end": all(committed[TopicPartition("jobs", p)].offset == cfg["records_per_partition"]
                             for p in range(n)),
        "zombie_commit": zombie,
    }
    echo(f"{cfg['consumers']} consumers, {n} partitions × {cfg['records_per_partition']} records, "
         f"session_timeout_ms={cfg['session_timeout_ms']}, assignor {cfg['assignor']}\n")
    echo(table(["", "generation", "assignment"],
               [["before the crash", gen_before, _fmt(before)],
                ["after the eviction", gen_after, _fmt(after)]]))
    echo(f"\n{victim.name} froze after processing {len(uncommitted)} uncommitted record(s) "
         f"(partition, offset): {sorted(uncommitted)}")
    echo(f"evicted {result['evicted_after_ms']} ms after the crash (no heartbeat for "
         f"session_timeout_ms={cfg['session_timeout_ms']} since its last one); partitions without "
         f"an owner: {result['unowned_partition_seconds']} partition-s (the victim's until the "
         f"takeover, plus any the survivors revoked in the rebalance)")
    echo(f"re-delivered to the survivors (at-least-once): {len(redelivered)} record(s) "
         f"{[tuple(r) for r in redelivered]}; every record processed: {result['every_record_processed']}")
    if zombie["commit_rejected"]:
        echo(f"the zombie's late commit: {zombie['error']}: {zombie['message']}")
    else:
        echo("the zombie's late commit was accepted (unexpected!)")
    result["simulated_ms"] = clock.now_ms() - START_MS
    return result


def _fmt(assignment: dict) -> str:
    return "  ".join(f"{c}:{','.join(map(str, p)) or '-'}" for c, p in assignment.items())


if __name__ == "__main__":
    raise SystemExit(main_for("consumer_crash"))
