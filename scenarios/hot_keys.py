"""Lab: hot partition — a few huge merchants overload one partition; three fixes side by side.

What you will see
-----------------
``records`` orders from ``keys`` merchants arrive over ``duration_s`` seconds of simulated
time. Merchant traffic follows a Zipf law (rank ``r`` has weight ``1/r**s``): a handful of
merchants produce most of the orders. They are keyed by merchant id and sent with the Java
client's default partitioner, **murmur2** (``toPositive(murmur2(key)) % partitions``,
Kafka's ``BuiltInPartitioner.partitionForKey``). Every order of a merchant goes to the same
partition — that is what gives Kafka per-key order — so the partition holding the hottest
merchant gets its whole load, and the course's alert fires: alerts.yml's
``KafkaHotPartition`` (a partition's bytes-in rate over 5 minutes above 5x its topic's
average, for 2 minutes), evaluated on the metrics ``kafkasim serve`` exports
(``kafkasim_partition_bytes_in_total``), scraped every ``scrape_s`` simulated seconds.

The same orders (same merchants, same times) then go through three fixes:

1. **composite key** (:class:`kafkasim.partitioning.partitioners.CompositeKeyPartitioner`):
   the merchant id is hashed with its time bucket (``key@ts//bucket_ms``), so a merchant
   moves partition every bucket. Price: every merchant's order holds only within a bucket.
2. **hot-key partitioner** (:class:`kafkasim.partitioning.partitioners.HotKeyPartitioner`):
   the ``hot`` biggest merchants are spread round robin over all partitions; the others keep
   murmur2. Price: those merchants (a large share of all orders) lose per-key order.
3. **split VIP topic**: the application sends the ``hot`` biggest merchants to a topic of
   their own, ``orders-vip``, one partition each, and everyone else to ``orders-regular``
   (murmur2). Price in order: none (each merchant still lives in one partition), but the
   biggest merchant still has one partition and so one consumer for itself, consumers read
   two topics, and promoting a merchant to VIP moves its history (a one-time split).

For each fix the lab prints the skew (max/avg records per partition), whether the alert
fired, and the price the ordering audit shows: its ``key_in_multiple_partitions`` check
(``kafkasim audit ordering``), here counted directly from the log.

Why
---
A partition is the unit of parallelism: one consumer of a group reads it, so the busiest
partition sets the group's pace, and a key cannot be split without giving up its order.

Kafka references: KIP-480/KIP-794 (the default partitioner), ``BuiltInPartitioner``;
"Kafka: The Definitive Guide", ch. 3 "Partitions" (custom partitioners for a hot key).

Run it: ``kafkasim scenario run hot-partition --plot-dir pics`` or
``python -m kafkasim.scenarios.hot_keys``.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, Callable, Optional

from kafkasim.clock import MockClock
from kafkasim.partitioning.partitioners import CompositeKeyPartitioner, HotKeyPartitioner, murmur2_partition
from kafkasim.producer import Producer
from kafkasim.scenarios import _figures as fig
from kafkasim.scenarios._alert_rule import Scraper, hot_partition_rule
from kafkasim.scenarios._common import START_MS, check_claim, fresh_broker, main_for, table
from kafkasim.server.metrics import ServerMetrics

__all__ = ["PARAMS", "CLAIM", "run", "zipf_keys"]

CLAIM = ("With murmur2 the partition holding the hottest merchant carries more than 5x the "
         "average and the hot-partition alert fires; each of the three fixes (composite key, "
         "hot-key partitioner, a separate VIP topic) keeps the alert quiet, the first two at "
         "the price of keys on several partitions, the VIP topic without it.")
"""The lab's point, asserted by :func:`run`."""

PARAMS: dict[str, Any] = {
    "partitions": 24,      # partitions of each topic (orders-vip has `hot`)
    "keys": 2000,          # distinct merchants
    "records": 12000,      # orders sent
    "duration_s": 600,     # simulated seconds the orders are spread over
    "zipf_s": 1.2,         # Zipf exponent: larger = more skew
    "hot": 3,              # merchants treated as hot by the hot-key partitioner and the VIP topic
    "bucket_ms": 60000,    # composite key's time bucket
    "scrape_s": 60,        # scrape and rule evaluation interval (Prometheus default: 1m), simulated s
}

FIXES = ("murmur2 (no fix)", "composite key", "hot-key partitioner", "VIP topic")


def zipf_keys(rng: random.Random, n_keys: int, n_records: int, s: float) -> list[bytes]:
    """``n_records`` keys ``merchant-0001 ..`` drawn with weight ``1/rank**s``."""
    names = [f"merchant-{r:04d}".encode() for r in range(1, n_keys + 1)]
    cum, total = [], 0.0
    for r in range(1, n_keys + 1):
        total += 1.0 / r ** s
        cum.append(total)
    return rng.choices(names, cum_weights=cum, k=n_records)


def _send_all(broker, clock: MockClock, fix: str, keys: list[bytes], hot: list[bytes],
              cfg: dict, seed: int, rule: dict) -> dict:
    """Send every order through ``fix``; scrape and evaluate the alert as time passes."""
    n = cfg["partitions"]
    tag = fix.split(" ")[0].lower()
    if fix == "VIP topic":
        topics = {"orders-regular": n, "orders-vip": len(hot)}
    else:
        topics = {f"orders-{tag}": n}
    for t, parts in topics.items():
        broker.create_topic(t, parts)
    partitioner = {"composite": CompositeKeyPartitioner(bucket_ms=cfg["bucket_ms"]),
                   "hot-key": HotKeyPartitioner(hot, hot_partitions=list(range(n)))}.get(tag, "murmur2")
    producer = Producer(broker, client_id=f"checkout-{tag}", partitioner=partitioner, seed=seed,
                        clock=clock, linger_ms=2000)   # simulated time: let batches fill
    metrics = ServerMetrics(broker)
    scraper = Scraper(rule)
    vip = {k: i for i, k in enumerate(hot)}
    start = clock.now_ms()
    gap = cfg["duration_s"] * 1000 / len(keys)
    pending: list = []
    ratios: dict[str, list] = {t: [] for t in topics}
    times: list[float] = []
    where: dict[tuple[str, bytes], set] = {}
    next_scrape = cfg["scrape_s"]

    def scrape(t_s: float) -> None:
        producer.flush()
        for f in pending:
            md = f.get()
            metrics.produced(md.topic, md.partition,
                             md.serialized_key_size + md.serialized_value_size, 1)
        pending.clear()
        scraper.scrape(t_s, metrics.exposition().decode())
        times.append(t_s)
        for t in topics:
            r = scraper.evaluate(t)
            ratios[t].append(None if r is None else round(r, 3))

    for i, k in enumerate(keys):
        t_ms = int(i * gap)
        while t_ms >= next_scrape * 1000:
            clock.set(start + next_scrape * 1000)
            scrape(next_scrape)
            next_scrape += cfg["scrape_s"]
        clock.set(start + t_ms)
        if fix == "VIP topic":
            topic, part = ("orders-vip", vip[k]) if k in vip else ("orders-regular", None)
        else:
            topic, part = next(iter(topics)), None
        pending.append(producer.send(topic, key=k, value=b"order" * 20, partition=part))
    clock.set(start + cfg["duration_s"] * 1000)
    scrape(cfg["duration_s"])
    producer.close()
    counts = {}
    for t in topics:
        counts[t] = [q["log_end_offset"] for q in broker.describe_topic(t)["partitions"]]
        for p in range(topics[t]):
            offset = 0
            while records := broker.fetch(t, p, offset).records:
                for r in records:
                    where.setdefault((t, r.key), set()).add(p)
                offset = records[-1].offset + 1
    split = sorted({k for (t, k), ps in where.items() if len(ps) > 1})
    per_key = Counter(keys)
    return {"fix": fix, "topics": {t: _skew(c) for t, c in counts.items()},
            "alert_fired_at_s": {t: scraper.fired_at.get(t) for t in topics},
            "keys_on_several_partitions": len(split),
            "orders_without_key_order": sum(per_key[k] for k in split),
            "ratio_over_time": {"t_s": times, **ratios}}


def _skew(counts: list[int]) -> dict:
    avg = sum(counts) / len(counts)
    return {"counts": counts, "max": max(counts), "avg": round(avg, 2),
            "max_over_avg": round(max(counts) / avg, 3) if avg else 0.0}


def run(data_dir: str, *, seed: int = 42, echo: Callable[[str], Any] = print,
        plot_dir: Optional[str] = None, **params: Any) -> dict:
    """Run the lab (see the module docstring); return skew, alert and price per fix."""
    cfg = {**PARAMS, **params}
    n, hot_n = cfg["partitions"], cfg["hot"]
    rule = hot_partition_rule()
    rng = random.Random(seed)
    clock = MockClock(START_MS)
    keys = zipf_keys(rng, cfg["keys"], cfg["records"], cfg["zipf_s"])
    freq = Counter(keys)
    top = sorted(freq.items(), key=lambda kv: (-kv[1], kv[0]))[:max(hot_n, 5)]
    hot = [k for k, _ in top[:hot_n]]
    with fresh_broker(data_dir, clock) as broker:
        fixes = [_send_all(broker, clock, f, keys, hot, cfg, seed, rule) for f in FIXES]
    hottest = [{"key": k.decode(), "orders": c, "share": round(c / len(keys), 4),
                "partition": murmur2_partition(k, n)} for k, c in top]

    base = fixes[0]
    base_topic = next(iter(base["topics"]))
    base_skew = base["topics"][base_topic]
    fired = base["alert_fired_at_s"][base_topic]
    echo(f"{len(keys):,} orders from {len(freq):,} merchants (Zipf s={cfg['zipf_s']}) over "
         f"{cfg['duration_s']} s, {n} partitions.\n")
    echo("The biggest merchants and the partition murmur2 gives them:")
    echo(table(["merchant", "orders", "share", "partition"],
               [[h["key"], h["orders"], f"{h['share']:.1%}", h["partition"]] for h in hottest]))
    echo("")
    rows = []
    for f in fixes:
        for t, s in f["topics"].items():
            at = f["alert_fired_at_s"][t]
            rows.append([f["fix"], t, s["max"], round(s["avg"]), f"{s['max_over_avg']:.2f}x",
                         "no" if at is None else f"yes, at {at:g} s",
                         f["keys_on_several_partitions"], f["orders_without_key_order"]])
    echo(table(["fix", "topic", "busiest partition (orders)", "average", "max/avg",
                "alert fired", "keys on >1 partition", "orders without key order"], rows))
    busiest = base_skew["counts"].index(base_skew["max"])
    echo(f"\nUnder murmur2, partition {busiest} takes {base_skew['max_over_avg']:.1f} times the "
         f"average load; {rule['name']} (rate over {rule['window_s'] // 60} minutes above "
         f"{rule['threshold']:g}x the topic average for {rule['for_s'] // 60} minutes) "
         + (f"fired {fired:g} s into the run." if fired is not None else "did not fire."))
    comp, hk, vipf = fixes[1], fixes[2], fixes[3]
    echo(f"The composite key spreads every merchant over time buckets: skew "
         f"{_max_skew(comp):.2f}x, but {comp['keys_on_several_partitions']:,} merchants now "
         f"have orders on several partitions. The hot-key partitioner spreads only the top "
         f"{hot_n}: skew {_max_skew(hk):.2f}x, {hk['keys_on_several_partitions']} merchants lose "
         f"order, but they carry {hk['orders_without_key_order']:,} of the "
         f"{len(keys):,} orders. The VIP topic keeps every merchant on one partition "
         f"({vipf['keys_on_several_partitions']} split): skew {_max_skew(vipf):.2f}x, yet the "
         f"biggest merchant's {top[0][1]:,} orders still go through one partition and one "
         f"consumer.")
    for f in fixes[1:]:
        for t in f["topics"]:
            peak = max((r for r in f["ratio_over_time"][t] if r is not None), default=0.0)
            if peak > rule["threshold"]:
                echo(f"Note: with the {f['fix']}, {t}'s ratio peaked at {peak:.1f}x, above the "
                     f"threshold, yet the alert stayed quiet: the condition has to hold for "
                     f"{rule['for_s']} s. Early in the run the rate window covers less than one "
                     f"{cfg['bucket_ms'] // 1000} s bucket, and within a bucket a composite key "
                     f"is still one key on one partition; it spreads only across buckets.")
    pictures = []
    if plot_dir is not None:
        pictures = _pictures(plot_dir, fixes, rule, cfg)
    result = {"claim": CLAIM, "pictures": pictures, "simulated_ms": clock.now_ms() - START_MS,
              "partitions": n, "records": len(keys), "merchants": len(freq),
              "zipf_s": cfg["zipf_s"], "hottest": hottest, "alert_rule": rule,
              "fixes": fixes}
    check_claim(base_skew["max_over_avg"] > rule["threshold"] and fired is not None, CLAIM,
                f"murmur2 max/avg {base_skew['max_over_avg']}, alert fired at {fired}")
    for f in fixes[1:]:
        check_claim(all(a is None for a in f["alert_fired_at_s"].values())
                    and _max_skew(f) < base_skew["max_over_avg"], CLAIM,
                    f"{f['fix']}: skew {_max_skew(f)}, alert {f['alert_fired_at_s']}")
    check_claim(comp["keys_on_several_partitions"] > 0 and hk["keys_on_several_partitions"] > 0
                and vipf["keys_on_several_partitions"] == 0, CLAIM,
                "keys on several partitions: " + ", ".join(
                    f"{f['fix']} {f['keys_on_several_partitions']}" for f in fixes))
    return result


def _max_skew(f: dict) -> float:
    return max(s["max_over_avg"] for s in f["topics"].values())


def _pictures(plot_dir: str, fixes: list[dict], rule: dict, cfg: dict) -> list[str]:
    figure, axes = fig.figure("Orders per partition: murmur2 and three hot-key fixes "
                              f"(red line: the alert's {rule['threshold']:g}x average)",
                              2, 2, size=(12, 8))
    for ax, f in zip(axes, fixes):
        topic = max(f["topics"], key=lambda t: f["topics"][t]["max"])
        s = f["topics"][topic]
        fig.bars(list(range(len(s["counts"]))), s["counts"], ax=ax,
                 title=f"{f['fix']}: {topic}, max/avg {s['max_over_avg']:.2f}x",
                 xlabel="partition", ylabel="orders (records)",
                 limit=rule["threshold"] * s["avg"], limit_label="alert limit")
    paths = [fig.save(figure, plot_dir, "hot-partition-skew")]
    series = {}
    x = fixes[0]["ratio_over_time"]["t_s"]
    for f in fixes:
        for t in f["topics"]:
            ys = f["ratio_over_time"][t]
            series[f"{f['fix']} ({t})"] = [float("nan") if y is None else y for y in ys]
    events = [(at, f"{rule['name']} fires") for at in fixes[0]["alert_fired_at_s"].values()
              if at is not None]
    paths.append(fig.save(fig.lines(
        x, series, title=f"Busiest partition's bytes-in rate over its topic's average "
                         f"(rate over {rule['window_s'] // 60} min, scraped every {cfg['scrape_s']} s)",
        xlabel="time (s)", ylabel="max rate / average rate (x)", limit=rule["threshold"],
        limit_label="alert threshold", events=events), plot_dir, "hot-partition-alert"))
    return paths


if __name__ == "__main__":
    raise SystemExit(main_for("hot_keys"))
