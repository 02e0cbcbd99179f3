"""The main job ``make demo`` runs: one end-to-end story, from keys to a Spark audit.

``run_demo(data_dir, seed)`` wipes ``data_dir`` (only a previous demo's dir or an empty
one), then, on a MockClock and seeded RNGs:

1. creates topic ``orders`` (6 partitions, 256 KiB segments);
2. three Java-default producers (murmur2, idempotent, audit headers on) send orders for
   2,000 merchants whose traffic follows a Zipf law (a few hot merchants);
3. consumer group ``billing`` (cooperative-sticky) starts with 2 members, scales out to 3
   (an incremental rebalance) and commits as it goes, leaving some lag;
4. the topic grows to 8 partitions and traffic goes on (keys move: Kafka's classic
   ordering hazard), and a fourth producer configured like a librdkafka client
   (``consistent_random``) writes some orders (the mixed-client bug);
5. the broker is closed and Spark, reading only the segment files, audits ordering,
   skew and lag in one session (``kafkasim audit all``); reports (``audits.json``) and
   charts go to ``<data_dir>/reports``.

Returns a JSON-able summary; ``echo`` prints the story. The same seed prints the same
result. Not thread-safe (one demo per data dir).
"""

from __future__ import annotations

import os
import random
import shutil
from typing import Callable, Optional

from kafkasim.broker import Broker
from kafkasim.consumer import Consumer
from kafkasim.clock import MockClock
from kafkasim.errors import InvalidArgumentError
from kafkasim.producer import Producer

__all__ = ["run_demo", "MARKER"]

MARKER = ".kafkasim-demo"
START_MS = 1_700_000_000_000
TOPIC = "orders"
GROUP = "billing"


def run_demo(data_dir: str, *, seed: int = 42, records: Optional[int] = None, spark: bool = True,
             echo: Optional[Callable[[str], None]] = print) -> dict:
    say = echo or (lambda _s: None)
    n = records or 30_000
    if n < 100:
        raise InvalidArgumentError(f"the demo needs at least 100 records, got records={n}")
    _fresh(data_dir)
    rng = random.Random(seed)
    clock = MockClock(START_MS)
    weights = [1.0 / (rank ** 1.1) for rank in range(1, 2001)]
    merchants = [b"merchant_%04d" % i for i in range(2000)]
    rng.shuffle(merchants)
    summary: dict = {"data_dir": data_dir, "seed": seed, "records": n}

    with Broker(data_dir, clock=clock) as broker:
        broker.create_topic(TOPIC, partitions=6, configs={"segment.bytes": str(256 * 1024)})
        say(f"1. created topic {TOPIC}: 6 partitions, 256 KiB segments, in {data_dir}")

        producers = [Producer(broker, client_id=f"checkout-{i}", clock=clock, seed=seed + i,
                              stamp_headers=True) for i in range(3)]
        group = [_consumer(broker, clock, "billing-a"), _consumer(broker, clock, "billing-b")]
        first = int(n * 0.7)
        sent = _produce(producers, rng, merchants, weights, clock, first, say_every=None)
        say(f"2. three Java-default producers sent {sent} orders for 2,000 merchants (Zipf traffic)")

        generations = [_settle(group, clock)]
        consumed = _consume(group, clock, rounds=20)
        say(f"3. group {GROUP} (cooperative-sticky): 2 members, generation {generations[-1]}: "
            + _owners(group))
        group.append(_consumer(broker, clock, "billing-c"))
        generations.append(_settle(group, clock))
        consumed += _consume(group, clock, rounds=10)
        say(f"   scaled out to 3 members, generation {generations[-1]}: {_owners(group)}; "
            f"{consumed} records processed and committed")

        broker.create_partitions(TOPIC, 8)
        clock.advance(300_000)   # past metadata.max.age.ms: the producers see 8 partitions
        late = _produce(producers, rng, merchants, weights, clock, n - first - n // 20, say_every=None)
        rdkafka = Producer(broker, client_id="legacy-rdkafka", clock=clock, seed=seed,
                           partitioner="consistent_random", stamp_headers=True)
        mixed = _produce([rdkafka], rng, merchants, weights, clock, n // 20, say_every=None)
        say(f"4. grew {TOPIC} to 8 partitions and sent {late} more orders; a librdkafka-style "
            f"producer (consistent_random) sent {mixed}")
        for p in producers + [rdkafka]:
            p.close()
        for c in group:
            c.close()
        parts = broker.describe_topic(TOPIC)["partitions"]
        summary["partitions"] = [{k: p[k] for k in ("partition", "log_end_offset", "segments", "size_bytes")}
                                 for p in parts]
        summary["generations"] = generations
        summary["consumed"] = consumed
    say("   per partition: " + ", ".join(f"p{p['partition']}={p['log_end_offset']}" for p in parts))

    if spark:
        summary["audits"] = _audit(data_dir, say)
    return summary


def _fresh(data_dir: str) -> None:
    if os.path.isdir(data_dir) and os.listdir(data_dir):
        if not os.path.exists(os.path.join(data_dir, MARKER)):
            raise InvalidArgumentError(
                f"refusing to wipe {data_dir!r}: it is not empty and was not made by the demo "
                f"(no {MARKER} file); pass an empty or new --data-dir")
        shutil.rmtree(data_dir)
    os.makedirs(data_dir, exist_ok=True)
    open(os.path.join(data_dir, MARKER), "w").close()


def _consumer(broker: Broker, clock: MockClock, client_id: str) -> Consumer:
    return Consumer(broker, TOPIC, group_id=GROUP, client_id=client_id, clock=clock,
                    enable_auto_commit=False, auto_offset_reset="earliest",
                    partition_assignment_strategy=["cooperative-sticky"])


def _produce(producers, rng, merchants, weights, clock, count, say_every) -> int:
    keys = rng.choices(merchants, weights=weights, k=count)
    for i, key in enumerate(keys):
        producers[i % len(producers)].send(TOPIC, key=key, value=b'{"order": %d, "amount": %d}'
                                           % (i, rng.randrange(1, 10_000)))
        if i % 100 == 99:
            clock.advance(20)
    for p in producers:
        p.flush()
    return count


def _settle(group: list, clock: MockClock, max_steps: int = 400) -> int:
    """Poll every member until the group is stable and every partition is owned."""
    for _ in range(max_steps):
        for c in group:
            c.poll(timeout_ms=0, max_records=1, update_offsets=False)
        clock.advance(100)
        gens = {c.generation_id for c in group}
        owned = sum(len(c.assignment()) for c in group)
        if len(gens) == 1 and None not in gens and not any(c.rebalance_pending for c in group) \
                and owned == group[0].partitions_for_topic(TOPIC).__len__():
            return gens.pop()
    raise RuntimeError("the demo group did not settle")  # a bug, not a user error


def _consume(group: list, clock: MockClock, rounds: int) -> int:
    total = 0
    for _ in range(rounds):
        for c in group:
            got = c.poll(timeout_ms=0, max_records=500)
            total += sum(len(v) for v in got.values())
            if got:
                c.commit()
        clock.advance(100)
    return total


def _owners(group: list) -> str:
    return "; ".join(f"{c.config['client_id']}→{sorted(tp.partition for tp in c.assignment())}"
                     for c in group)


def _audit(data_dir: str, say) -> dict:
    """``kafkasim audit all`` over the demo's topic: one session, one scan, three reports."""
    from kafkasim.spark_jobs import audit_all, common, options
    from kafkasim.spark_jobs.progress import Progress
    from kafkasim.spark_jobs.session import build_session

    reports = os.path.join(data_dir, "reports")
    os.makedirs(reports, exist_ok=True)
    say("5. Spark audits over the segment files (no broker running): kafkasim audit all")
    args = common.job_parser("audit_all", "", "")
    options.all_audits(args)
    args = args.parse_args(["--data-dir", data_dir, "--topic", TOPIC, "--plot-dir", reports])
    topics = common.check_inputs(data_dir, [TOPIC])
    spark = build_session("kafkasim-demo", master="local[*]", extra_conf={
        "spark.sql.shuffle.partitions": str(common.shuffle_partitions_for(common.input_bytes(data_dir, topics), 2))})
    try:
        rep = audit_all.build_report(spark, data_dir, topics, args, Progress())
        common.write_json(rep, os.path.join(reports, "audits.json"))
        for line in audit_all.text(rep).splitlines():
            say("   " + line)
        say(f"   reports and charts: {reports}")
        return {"ordering_violations": rep["ordering"]["violations"],
                "max_over_avg": rep["skew"]["max_over_avg"], "gini": rep["skew"]["gini"],
                "reports": reports}
    finally:
        spark.stop()
