"""Lab: share groups (KIP-932, "queues for Kafka") — more consumers than partitions, record by record.

What you will see
-----------------
A topic of ``partitions`` (6) partitions holds a backlog of ``records_per_partition`` jobs
per partition, keyed by customer (``keys_per_partition`` customers per partition, on their
murmur2 partition). Every job costs a consumer ``record_ms`` (10 ms) of its time: one
consumer handles at most 100 jobs per second. The same jobs are processed four times, on
fresh topics, by 6 and then 12 consumers (``sizes``):

1. **A consumer group** (``Consumer``, Kafka's classic protocol, ``range`` assignor): each
   partition has one owner. With 12 consumers **6 sit idle** and throughput stays at
   6 x 100 jobs/s.
2. **A share group** (``ShareConsumer``, explicit acknowledgement): the ``simple`` share
   assignor gives each partition to one or more members, and the members *share* a
   partition's records: each ShareFetch **acquires** up to ``max_poll_records`` available
   records under a lock (``group.share.record.lock.duration.ms``), the member processes
   them and **acknowledges** each one (ACCEPT). With 12 consumers nobody is idle and
   throughput **doubles**.
3. **Per-key order breaks** in the share group. Each consumer writes one output record per
   job to ``results-<run>``, with the headers ``kafkasim-input`` (``"<partition>:<offset>"``
   of the job) and, in the share group, ``kafkasim-delivery-count``. Two members working on
   one partition finish its records in no particular order, so a customer's results come
   out of input order: the lab counts these *input-order inversions*, and the Spark
   ordering audit counts the same ones (``kafkasim audit ordering --data-dir DIR --topic
   results-share-12``: check ``input_order_inversion``, cause ``concurrent_delivery``).
   The consumer group's outputs have none.
4. **A poison job** (``poison_offset`` of partition ``poison_partition``) makes its handler
   fail every time; the share consumer acknowledges it RELEASE (``poison_ack``; or REJECT),
   so it is delivered again with its delivery count + 1, to any member, until the count
   reaches ``group.share.delivery.count.limit`` (``delivery_count_limit``, Kafka's default
   5): then the broker **archives** it. The jobs behind it never wait: the other members go
   on acquiring the records after it, and at the end the share-partition start offset
   (SPSO) of every partition is at the log end.

Why
---
Within a consumer group a partition has exactly one owner: that is how Kafka keeps
per-partition (and so per-key) order, and it caps a group's parallelism at the partition
count. A share group has no owner per partition: records are acquired, locked and
acknowledged one by one (the share-partition keeps their states, Available, Acquired,
Acknowledged, Archived, between the SPSO and the SPEO), so any number of consumers can
work on one partition — at the price of the order. A failing record is retried a bounded
number of times instead of blocking its partition (a consumer group's app must skip it or
stop; here it skips it, with no output).

The simulation: every consumer is stepped on one MockClock, ``record_ms`` per step; in a
step a consumer with jobs in hand processes one (and writes its result), and a consumer
with none polls (a ShareFetch carries its acknowledgements) and starts the first job it
got. Before the jobs are written, the consumers poll for ``warmup_s`` simulated seconds so
the groups are stable (share group members learn a new assignment on their next heartbeat,
``group.share.heartbeat.interval.ms``, 5 s). Throughput is measured while every partition
still has jobs waiting: the jobs finished from their arrival until the first partition has
none left, per second. (The ``simple`` share assignor does not spread members evenly: the
first member to join keeps every partition it was given, and the others are hashed onto
partitions, so some partitions have more members than others and run dry sooner.)

Kafka references: KIP-932 (Queues for Kafka); ``KafkaShareConsumer``, ``AcknowledgeType``;
``SharePartition``; broker configs ``group.share.delivery.count.limit``,
``group.share.record.lock.duration.ms``, ``group.share.heartbeat.interval.ms``;
``SimpleAssignor``.

Run it: ``kafkasim scenario run share-groups --plot-dir pics``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Optional

from kafkasim.clock import MockClock
from kafkasim.consumer import Consumer
from kafkasim.consumer.share_consumer import AcknowledgeType, ShareConsumer
from kafkasim.errors import IllegalStateError, InvalidArgumentError
from kafkasim.partitioning.partitioners import partition_for_key
from kafkasim.scenarios import _figures as fig
from kafkasim.scenarios._common import (
    START_MS, check_claim, fmt_assignment, fresh_broker, lab_clock, main_for, table,
)
from kafkasim.types import DELIVERY_COUNT_HEADER, INPUT_HEADER, TopicPartition

__all__ = ["PARAMS", "CLAIM", "run", "input_order_inversions"]

CLAIM = ("A consumer group uses at most one consumer per partition, so 12 consumers on 6 partitions "
         "leave 6 idle and process no faster than 6; a share group's 12 consumers all work and "
         "process about twice as fast, but a key's records are processed out of order, and a "
         "poison record is archived after group.share.delivery.count.limit deliveries without "
         "blocking its partition.")
"""The lab's point, asserted by :func:`run`."""

PARAMS: dict[str, Any] = {
    "partitions": 6,
    "sizes": [6, 12],
    "keys_per_partition": 4,
    "records_per_partition": 400,
    "batch_records": 5,            # records per produced batch
    "record_ms": 10,               # a consumer's time per record
    "max_poll_records": 10,
    "warmup_s": 6,
    "delivery_count_limit": 5,     # group.share.delivery.count.limit
    "poison_partition": 0,
    "poison_offset": 20,
    "poison_ack": "release",       # release | reject
}

_STEP_LIMIT = 200_000
_KIND = {"group": "consumer group", "share": "share group"}


def _keys(partitions: int, per_partition: int) -> dict[int, list[bytes]]:
    """``keys_per_partition`` customer ids per partition, the first names murmur2 puts there."""
    out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    i = 0
    while any(len(ks) < per_partition for ks in out.values()):
        key = f"customer-{i:03d}".encode()
        p = partition_for_key(key, partitions)
        if len(out[p]) < per_partition:
            out[p].append(key)
        i += 1
    return out


def input_order_inversions(outputs: list[tuple[int, bytes, int, int]]) -> int:
    """The ordering audit's ``input_order_inversion`` over one output topic's records
    ``[(output partition, key, input partition, input offset)]`` in append order: the first
    output of an input record whose input offset is below the largest input offset of an
    earlier output of the same (output partition, key, input partition)."""
    seen: set[tuple] = set()
    highest: dict[tuple, int] = {}
    found = 0
    for out_p, key, in_p, in_o in outputs:
        if (key, in_p, in_o) in seen:
            continue
        seen.add((key, in_p, in_o))
        group = (out_p, key, in_p)
        if group in highest and in_o < highest[group]:
            found += 1
        highest[group] = max(in_o, highest.get(group, in_o))
    return found


class _Worker:
    """One consumer of a run: its jobs in hand and what it did."""

    def __init__(self, name: str, consumer) -> None:
        self.name, self.consumer = name, consumer
        self.queue: list = []
        self.done = 0
        self.pending_commit = False


def _one_run(broker, clock: MockClock, mode: str, size: int, cfg: dict, keys: dict, seed: int) -> dict:
    """Process the same backlog with ``size`` consumers of a ``mode`` ("group"/"share") group."""
    n, rms = cfg["partitions"], cfg["record_ms"]
    topic, out_topic, group = f"jobs-{mode}-{size}", f"results-{mode}-{size}", f"{mode}-{size}"
    broker.create_topic(topic, n)
    broker.create_topic(out_topic, n)
    workers = []
    for i in range(size):
        name = f"c{i:02d}"
        if mode == "group":
            c = Consumer(broker, group_id=group, client_id=name, clock=clock, auto_offset_reset="earliest",
                         enable_auto_commit=False, max_poll_records=cfg["max_poll_records"])
        else:
            c = ShareConsumer(broker, group_id=group, client_id=name, clock=clock,
                              share_acknowledgement_mode="explicit", max_poll_records=cfg["max_poll_records"],
                              seed=f"{seed}:{group}:{name}")
        c.subscribe([topic])
        workers.append(_Worker(name, c))
    for _ in range(cfg["warmup_s"] * 1000 // 100):          # join: every member polls, nothing to read yet
        clock.advance(100)
        for w in workers:
            w.consumer.poll(0)
    assignment = _assignment(broker, workers, mode, group)
    poison = TopicPartition(topic, cfg["poison_partition"])
    for p in range(n):                                       # the backlog, the same in every run
        ks = keys[p]
        for first in range(0, cfg["records_per_partition"], cfg["batch_records"]):
            last = min(first + cfg["batch_records"], cfg["records_per_partition"])
            broker.append_records(topic, p, [(clock.now_ms(), ks[o % len(ks)], b"job-%d-%d" % (p, o), ())
                                             for o in range(first, last)])
    total = n * cfg["records_per_partition"]
    t0 = clock.now_ms()
    outputs: list[tuple[int, bytes, int, int]] = []
    finished_at: list[int] = []                              # ms after t0 of each job finished
    drained_at: dict[int, int] = {}                          # partition -> ms after t0 of its last job
    poison_deliveries: list[dict] = []
    deliveries: Counter = Counter()                          # (partition, offset) -> deliveries seen
    skipped = 0
    steps = 0

    def handle(w: _Worker, r) -> None:
        nonlocal skipped
        now = clock.now_ms()
        tp = TopicPartition(r.topic, r.partition)
        if tp == poison and r.offset == cfg["poison_offset"]:
            if mode == "share":
                poison_deliveries.append({"t_ms": now - t0, "member": w.name, "delivery_count": r.delivery_count})
                w.consumer.acknowledge(r, AcknowledgeType.RELEASE if cfg["poison_ack"] == "release"
                                       else AcknowledgeType.REJECT)
            else:
                skipped += 1                                 # a consumer group's app can only skip it (or stop)
            return
        headers = [(INPUT_HEADER, f"{r.partition}:{r.offset}".encode())]
        if mode == "share":
            headers.append((DELIVERY_COUNT_HEADER, str(r.delivery_count).encode()))
            w.consumer.acknowledge(r, AcknowledgeType.ACCEPT)
        out_p = partition_for_key(r.key, n)
        broker.append_records(out_topic, out_p, [(now, r.key, b"done", headers)])
        outputs.append((out_p, r.key, r.partition, r.offset))
        finished_at.append(now - t0)
        drained_at[r.partition] = now - t0
        w.done += 1

    def all_done() -> bool:
        if len(outputs) < total - 1:
            return False
        if mode == "group":
            return skipped >= 1
        limit = cfg["delivery_count_limit"] if cfg["poison_ack"] == "release" else 1
        return len(poison_deliveries) >= limit and not any(w.queue for w in workers)

    while not all_done():
        steps += 1
        if steps > _STEP_LIMIT:
            raise IllegalStateError(f"the {group} run did not finish within {_STEP_LIMIT * rms} ms of simulated "
                                    f"time ({len(outputs)} of {total} jobs done)")
        for w in workers:
            if not w.queue:
                if mode == "group":
                    if w.pending_commit:
                        w.consumer.commit()
                        w.pending_commit = False
                    w.queue = [r for recs in w.consumer.poll(0).values() for r in recs]
                    w.pending_commit = bool(w.queue)
                else:
                    w.queue = list(w.consumer.poll(0))
                for r in w.queue:
                    deliveries[(r.partition, r.offset)] += 1
            if w.queue:
                handle(w, w.queue.pop(0))
        clock.advance(rms)
    for w in workers:
        if mode == "share":
            w.consumer.commit_sync()
        elif w.pending_commit:
            w.consumer.commit()
    spso = {}
    if mode == "share":
        spso = {tp.partition: v["start_offset"] for tp, v in
                sorted(broker.describe_share_group_offsets(group).items())}
    for w in workers:
        w.consumer.close()
    measure_ms = min(drained_at.values())                   # until the first partition has no job left
    in_window = sum(1 for t in finished_at if t <= measure_ms)
    bucket = 100
    series = [0] * (max(finished_at) // bucket + 1)
    for t in finished_at:
        series[min(t // bucket, len(series) - 1)] += 1
    poison_tail = [o for (p_, _k, ip, o) in outputs if ip == cfg["poison_partition"] and o > cfg["poison_offset"]]
    return {
        "mode": mode, "consumers": size, "topic": topic, "output_topic": out_topic, "group": group,
        "assignment": assignment, "idle": sorted(w.name for w in workers if w.done == 0),
        "processed_per_member": {w.name: w.done for w in workers},
        "throughput_per_s": round(in_window * 1000 / measure_ms, 1), "measured_ms": measure_ms,
        "drain_ms": max(finished_at), "jobs_done": len(outputs),
        "inversions": input_order_inversions(outputs),
        "delivery_counts": dict(sorted(Counter(deliveries.values()).items())),
        "poison": {"partition": cfg["poison_partition"], "offset": cfg["poison_offset"],
                   "deliveries": poison_deliveries, "skipped": skipped,
                   "later_jobs_done": len(poison_tail),
                   "later_jobs": cfg["records_per_partition"] - cfg["poison_offset"] - 1},
        "spso": spso, "log_end": cfg["records_per_partition"],
        "over_time": {"t_s": [round((i + 1) * bucket / 1000, 1) for i in range(len(series))],
                      "jobs_per_s": [c * 1000 // bucket for c in series]},
    }


def _assignment(broker, workers: list[_Worker], mode: str, group: str) -> dict[str, list[int]]:
    """Who holds which partitions once the group is stable (else IllegalStateError)."""
    if mode == "group":
        d = broker.describe_group(group)
        if d["state"] != "Stable" or len({w.consumer.generation_id for w in workers}) != 1:
            raise IllegalStateError(f"group {group!r} is not stable after the warm-up")
        return {w.name: sorted(tp.partition for tp in w.consumer.assignment()) for w in workers}
    (d,) = broker.share_group_describe([group])
    if d.get("error") or any(m["member_epoch"] != d["group_epoch"] for m in d["members"]):
        raise IllegalStateError(f"share group {group!r} is not stable after the warm-up: {d}")
    return {w.name: sorted(tp.partition for tp in w.consumer.assignment()) for w in workers}


def run(data_dir: str, *, seed: int = 42, echo: Callable[[str], Any] = print,
        plot_dir: Optional[str] = None, **params: Any) -> dict:
    """Run the lab (see the module docstring); return one measurement per group type and size."""
    cfg = {**PARAMS, **params}
    _check(cfg)
    n, sizes = cfg["partitions"], list(cfg["sizes"])
    capacity = 1000 / cfg["record_ms"]
    keys = _keys(n, cfg["keys_per_partition"])
    clock = lab_clock()
    configs = {"group.share.delivery.count.limit": cfg["delivery_count_limit"]}
    with fresh_broker(data_dir, clock, broker_configs=configs, topic_id_seed=seed) as broker:
        runs = [_one_run(broker, clock, mode, size, cfg, keys, seed) for mode in ("group", "share") for size in sizes]
    by = {(r["mode"], r["consumers"]): r for r in runs}
    small, big = min(sizes), max(sizes)

    echo(f"{n} partitions x {cfg['records_per_partition']} jobs ({cfg['keys_per_partition']} customers per "
         f"partition); a job costs {cfg['record_ms']} ms, so one consumer does at most {capacity:g} jobs/s.\n")
    echo(table(["kind", "consumers", "idle", "jobs/s (backlog everywhere)", "all done after",
                "input-order inversions", "who reads what"],
               [[_KIND[r["mode"]], r["consumers"], len(r["idle"]), f"{r['throughput_per_s']:g}",
                 f"{r['drain_ms'] / 1000:g} s", r["inversions"], fmt_assignment(r["assignment"])] for r in runs]))
    echo("")
    g_small, g_big, s_small, s_big = by["group", small], by["group", big], by["share", small], by["share", big]
    echo(f"Consumer group: {small} -> {big} consumers changes throughput {g_small['throughput_per_s']:g} -> "
         f"{g_big['throughput_per_s']:g} jobs/s; {len(g_big['idle'])} of {big} consumers processed nothing "
         f"({', '.join(g_big['idle']) or 'none'}): one owner per partition.")
    ratio = s_big["throughput_per_s"] / s_small["throughput_per_s"] if s_small["throughput_per_s"] else 0.0
    echo(f"Share group: {small} -> {big} consumers changes throughput {s_small['throughput_per_s']:g} -> "
         f"{s_big['throughput_per_s']:g} jobs/s ({ratio:.2f}x); idle: {len(s_big['idle'])}.")
    echo(f"Per-key order: the {big} share consumers wrote {s_big['inversions']:,} results out of their input order "
         f"(same customer, same input partition, a later job's result first); the consumer group wrote "
         f"{g_big['inversions']}. Audit it: kafkasim audit ordering --data-dir {data_dir} --topic "
         f"{s_big['output_topic']}")
    p = s_big["poison"]
    seen = ", ".join(f"#{d['delivery_count']} to {d['member']} at {d['t_ms'] / 1000:g} s" for d in p["deliveries"])
    echo(f"Poison job (partition {p['partition']} offset {p['offset']}, acknowledged {cfg['poison_ack'].upper()}): "
         f"delivered {len(p['deliveries'])} times ({seen}), then archived "
         f"(group.share.delivery.count.limit = {cfg['delivery_count_limit']}); the {p['later_jobs']} jobs after it "
         f"in its partition were all done ({p['later_jobs_done']}), and every partition's SPSO is at its log end "
         f"({', '.join(f'p{q}: {o}' for q, o in s_big['spso'].items())}).")
    echo(f"Records by delivery count ({big} share consumers): "
         + ", ".join(f"{k}: {v:,}" for k, v in s_big["delivery_counts"].items()) + ".")

    pictures = _pictures(plot_dir, runs, cfg, capacity) if plot_dir is not None else []
    result = {"claim": CLAIM, "pictures": pictures, "simulated_ms": clock.now_ms() - START_MS,
              "partitions": n, "sizes": sizes, "member_capacity_per_s": capacity,
              "share_speedup": round(ratio, 3), "runs": runs}
    _check_claim(runs, by, cfg, small, big, ratio)
    return result


def _check(cfg: dict) -> None:
    sizes = list(cfg["sizes"])
    if len(sizes) != 2 or not 0 < sizes[0] < sizes[1]:
        raise InvalidArgumentError(f"sizes {sizes}: two group sizes, the smaller first, e.g. 6,12")
    if cfg["poison_ack"] not in ("release", "reject"):
        raise InvalidArgumentError(f"poison_ack {cfg['poison_ack']!r}: release or reject")
    if not 0 <= cfg["poison_partition"] < cfg["partitions"] or \
            not 0 <= cfg["poison_offset"] < cfg["records_per_partition"]:
        raise InvalidArgumentError(f"poison at partition {cfg['poison_partition']} offset {cfg['poison_offset']}: "
                                   f"outside the topic's {cfg['partitions']} x {cfg['records_per_partition']} jobs")
    for name in ("record_ms", "max_poll_records", "batch_records", "keys_per_partition", "warmup_s"):
        if cfg[name] <= 0:
            raise InvalidArgumentError(f"{name} {cfg[name]}: must be positive")


def _check_claim(runs: list[dict], by: dict, cfg: dict, small: int, big: int, ratio: float) -> None:
    n = cfg["partitions"]
    g_small, g_big, s_small, s_big = by["group", small], by["group", big], by["share", small], by["share", big]
    check_claim(len(g_big["idle"]) == max(0, big - n), CLAIM,
                f"a consumer group of {big} on {n} partitions had {len(g_big['idle'])} idle members")
    check_claim(g_big["throughput_per_s"] <= 1.1 * g_small["throughput_per_s"], CLAIM,
                f"consumer group throughput {g_small['throughput_per_s']} -> {g_big['throughput_per_s']} jobs/s")
    want = 0.9 * big / small                  # every member busy while the backlog lasts, less 10 %
    check_claim(not s_big["idle"] and ratio >= want, CLAIM,
                f"share group throughput {s_small['throughput_per_s']} -> {s_big['throughput_per_s']} jobs/s "
                f"({ratio:.2f}x, wanted at least {want:.2f}x), idle {s_big['idle']}")
    check_claim(s_big["inversions"] > 0 and all(r["inversions"] == 0 for r in runs if r["mode"] == "group"),
                CLAIM, "input-order inversions: " + ", ".join(f"{r['group']}: {r['inversions']}" for r in runs))
    limit = cfg["delivery_count_limit"] if cfg["poison_ack"] == "release" else 1
    for r in runs:
        if r["mode"] != "share":
            continue
        p = r["poison"]
        counts = [d["delivery_count"] for d in p["deliveries"]]
        check_claim(counts == list(range(1, limit + 1)), CLAIM,
                    f"{r['group']}: the poison record's delivery counts were {counts}, expected 1..{limit}")
        check_claim(p["later_jobs_done"] == p["later_jobs"] and r["jobs_done"] == n * cfg["records_per_partition"] - 1
                    and all(o == r["log_end"] for o in r["spso"].values()) and len(r["spso"]) == n, CLAIM,
                    f"{r['group']}: {p['later_jobs_done']} of the {p['later_jobs']} jobs after the poison done, "
                    f"SPSO {r['spso']} against log end {r['log_end']}")


def _pictures(plot_dir: str, runs: list[dict], cfg: dict, capacity: float) -> list[str]:
    """Throughput over time per run; records by delivery count and the poison's deliveries."""
    label = {(r["mode"], r["consumers"]): f"{_KIND[r['mode']]}, {r['consumers']} consumers" for r in runs}
    width = max(len(r["over_time"]["t_s"]) for r in runs)
    x = [round((i + 1) * 0.1, 1) for i in range(width)]
    series: dict[str, list] = {}
    for r in runs:
        ys = r["over_time"]["jobs_per_s"] + [0] * (width - len(r["over_time"]["t_s"]))
        same = [name for name, other in series.items() if other == ys and name.startswith(_KIND[r["mode"]])]
        if same:                  # identical runs (a consumer group of 6 and of 12): one line, both named
            series[f"{same[0]} and {r['consumers']} (the same)"] = series.pop(same[0])
        else:
            series[label[r["mode"], r["consumers"]]] = ys
    figure, axes = fig.figure(f"{cfg['partitions']} partitions: a consumer group stops at one consumer per "
                              f"partition, a share group keeps scaling", 1, 2, size=(15, 5))
    fig.lines(x, series, ax=axes[0], title="jobs finished per second (100 ms buckets)", xlabel="time (s)",
              ylabel="jobs per second", limit=cfg["partitions"] * capacity,
              limit_label="one consumer per partition")
    fig.grouped([str(s) for s in cfg["sizes"]],
                {"consumer group": [r["throughput_per_s"] for r in runs if r["mode"] == "group"],
                 "share group": [r["throughput_per_s"] for r in runs if r["mode"] == "share"]},
                ax=axes[1], title="throughput while every partition has jobs waiting", xlabel="consumers",
                ylabel="jobs per second")
    paths = [fig.save(figure, plot_dir, "share-groups-throughput")]
    big = [r for r in runs if r["mode"] == "share"][-1]
    figure, axes = fig.figure(f"Delivery counts ({big['consumers']} share consumers): the poison record is "
                              f"archived at group.share.delivery.count.limit", 1, 2, size=(15, 5))
    limit = cfg["delivery_count_limit"]
    counts = big["delivery_counts"]
    ks = list(range(1, max([limit, *counts]) + 1))
    fig.bars([str(k) for k in ks], [counts.get(k, 0) for k in ks], ax=axes[0], average=False,
             title="records by how many times they were delivered", xlabel="deliveries",
             ylabel="records (log scale)")
    axes[0].set_yscale("log")
    pd = big["poison"]["deliveries"]
    members = sorted({d["member"] for d in pd})
    fig.lines([d["t_ms"] / 1000 for d in pd], {"poison record": [d["delivery_count"] for d in pd]},
              ax=axes[1], title=f"the poison record's deliveries (to {', '.join(members)})", xlabel="time (s)",
              ylabel="delivery count", limit=limit, limit_label="group.share.delivery.count.limit", step=True)
    paths.append(fig.save(figure, plot_dir, "share-groups-deliveries"))
    return paths


if __name__ == "__main__":
    raise SystemExit(main_for("share_groups"))
