"""Lab: null-key batching — round robin against sticky: bigger batches, short-term imbalance that evens out.

What you will see
-----------------
The same stream of records **without keys** (``records`` records of ``value_bytes``
bytes, about ``rate_per_ms`` per millisecond, with the producer's default
``linger.ms=5`` and ``batch.size=16384``) is sent twice, to two topics of ``partitions``
partitions:

- ``round_robin``: Kafka ≤ 2.3's DefaultPartitioner, which sent each keyless record to
  the next partition in turn;
- ``murmur2``: today's default (KIP-480, refined by KIP-794 in Kafka 3.3: Java's
  ``BuiltInPartitioner``), which is **sticky** for keyless records: it keeps sending to
  one partition until ``batch.size`` bytes went there, then picks another at random.

The first table reads the batches back from the segment files (as ``kafka-dump-log``
would) and shows records per batch and the number of batches (= produce requests' worth of
work for the broker). The second shows the imbalance across partitions — the busiest
partition's records over the average — measured over windows of increasing length.

Why
---
With per-record round robin, the records arriving within one ``linger.ms`` are spread
over every partition, so each partition's batch closes with only one or two records:
many small batches, many requests, more latency and CPU per record. Sticky fills one
batch at a time, so batches are several times larger. The price is **short-window
imbalance**: over tens of milliseconds all keyless traffic goes to one or two
partitions (max/avg near the partition count). Over seconds the random choices even
out and max/avg approaches 1, as round robin's is at every scale. The lab checks the
whole run's max/avg against ``evens_out_limit``.

The pictures: ``null-key-batching-batches.png`` (records per batch, per partitioner)
and ``null-key-batching-imbalance.png`` (max/avg against window length, the limit drawn).

Kafka references: KIP-480 (sticky partitioner), KIP-794 (uniform sticky,
``BuiltInPartitioner``), producer configs ``linger.ms``, ``batch.size``,
``partitioner.class``.

Invariants: the same seed and params give the same text, JSON and PNG bytes; the lab
writes only into its data dir (wiped first) and ``plot_dir``.
Thread-safety: one run per data dir at a time; the module keeps no state between runs.

Run it: ``kafkasim scenario run null-key-batching`` or
``python -m kafkasim.scenarios.null_key_batching``.
"""

from __future__ import annotations

import os
import random
from typing import Any, Callable, Optional

from kafkasim.arguments import check_arg
from kafkasim.errors import InvalidArgumentError
from kafkasim.producer import Producer
from kafkasim.scenarios import _figures as fig
from kafkasim.scenarios._common import START_MS, check_claim, fresh_broker, main_for, table, lab_clock
from kafkasim.storage.inspection import dump_segment
from kafkasim.storage.layout import list_segments, partition_dir_name

__all__ = ["PARAMS", "CLAIM", "run", "imbalance"]

PARAMS: dict[str, Any] = {
    "partitions": 6,
    "records": 12000,          # keyless records sent
    "rate_per_ms": 2,          # average records per ms of simulated time
    "value_bytes": 1000,       # bytes per record value
    "windows_ms": [10, 100, 1000],   # window lengths for the imbalance table
    "evens_out_limit": 1.2,    # the whole run's max/avg must stay below this (sticky)
}

CLAIM = ("For records without keys the sticky partitioner makes batches several times larger "
         "than per-record round robin; it is badly imbalanced over short windows but evens out "
         "over the whole run.")

PARTITIONERS = ("round_robin", "murmur2")


def imbalance(events: list[tuple[int, int]], n: int, window_ms: Optional[int]) -> float:
    """Mean over windows of (busiest partition's records / average records per partition).

    ``events`` are ``(timestamp_ms, partition)``; ``window_ms=None`` is one window, the whole
    run. Windows without records are skipped.
    """
    if not events:
        return 0.0
    start = events[0][0]
    windows: dict[int, list[int]] = {}
    for ts, p in events:
        w = 0 if window_ms is None else (ts - start) // window_ms
        windows.setdefault(w, [0] * n)[p] += 1
    ratios = [max(c) / (sum(c) / n) for c in windows.values()]
    return round(sum(ratios) / len(ratios), 3)


def _batches(data_dir: str, topic: str, n: int) -> list[dict]:
    out = []
    for p in range(n):
        path = os.path.join(data_dir, partition_dir_name(topic, p))
        for _, log_path in list_segments(path):
            out.extend({"partition": p, "count": b["count"], "size": b["size"]}
                       for b in dump_segment(log_path) if "error" not in b)
    return out


def run(data_dir: str, *, seed: int = 42, echo: Callable[[str], Any] = print,
        plot_dir: Optional[str] = None, **params: Any) -> dict:
    """Run the lab (see the module docstring); return batch sizes and imbalance per partitioner."""
    cfg = {**PARAMS, **params}
    for k in ("partitions", "records", "rate_per_ms"):
        check_arg(k, cfg[k], "int", min=1)
    check_arg("value_bytes", cfg["value_bytes"], "int", min=0)
    if not cfg["windows_ms"] or any(not isinstance(w, int) or w < 1 for w in cfg["windows_ms"]):
        raise InvalidArgumentError(f"windows_ms must be positive integers, got {cfg['windows_ms']!r}")
    n, total = cfg["partitions"], cfg["records"]
    rng = random.Random(seed)
    rate = cfg["rate_per_ms"]
    arrivals: list[int] = []            # records sent in each ms, the same for both runs
    left = total
    while left > 0:
        arrivals.append(min(rng.randint(0, 2 * rate), left))
        left -= arrivals[-1]
    value = bytes(cfg["value_bytes"])
    clock = lab_clock()
    runs: dict[str, dict] = {}
    with fresh_broker(data_dir, clock) as broker:
        for name in PARTITIONERS:
            topic = f"events-{name.replace('_', '-')}"
            broker.create_topic(topic, n)
            producer = Producer(broker, client_id=f"lab-{name}", partitioner=name, seed=seed,
                                clock=clock, linger_ms=5, batch_size=16384, acks=1)
            futures = []
            for count in arrivals:
                for _ in range(count):
                    futures.append(producer.send(topic, value=value))
                clock.advance(1)
                producer.poll()
            producer.close()
            events = [(md.timestamp, md.partition) for md in (f.get() for f in futures)]
            broker.flush()
            batches = _batches(broker.data_dir, topic, n)
            counts = [0] * n
            for _, p in events:
                counts[p] += 1
            per_batch = [b["count"] for b in batches]
            runs[name] = {
                "topic": topic, "records_per_partition": counts, "batches": len(batches),
                "records_per_batch_avg": round(sum(per_batch) / len(per_batch), 2),
                "records_per_batch_max": max(per_batch),
                "bytes_per_batch_avg": round(sum(b["size"] for b in batches) / len(batches)),
                "batch_record_counts": per_batch,
                "imbalance": {str(w): imbalance(events, n, w) for w in cfg["windows_ms"]},
                "imbalance_whole_run": imbalance(events, n, None),
            }
    rr, st = runs["round_robin"], runs["murmur2"]
    seconds = len(arrivals) / 1000
    echo(f"{total} records without keys, {cfg['value_bytes']} bytes each, over {seconds:.1f} s "
         f"of simulated time (about {rate} per ms), to {n} partitions; linger.ms=5, batch.size=16384.\n")
    echo("Batches as stored in the segment files:")
    echo(table(["partitioner", "batches", "records per batch (avg)", "largest batch",
                "bytes per batch (avg)"],
               [[f"{name} ({'sticky' if name == 'murmur2' else 'per-record round robin'})",
                 r["batches"], r["records_per_batch_avg"], r["records_per_batch_max"],
                 r["bytes_per_batch_avg"]] for name, r in runs.items()]))
    echo("\nBusiest partition over the average, per window length (1.0 = perfectly even, "
         f"{n} = everything on one partition):")
    echo(table(["partitioner"] + [f"{w} ms" for w in cfg["windows_ms"]] + ["whole run"],
               [[name] + [r["imbalance"][str(w)] for w in cfg["windows_ms"]] + [r["imbalance_whole_run"]]
                for name, r in runs.items()]))
    echo("\nRecords per partition over the whole run:")
    echo(table(["partitioner"] + [f"p{p}" for p in range(n)],
               [[name] + r["records_per_partition"] for name, r in runs.items()]))
    factor = st["records_per_batch_avg"] / rr["records_per_batch_avg"]
    switches = total * (cfg["value_bytes"] + 8) // 16384
    short = str(cfg["windows_ms"][0])
    echo(f"\nSticky sent {factor:.1f} times as many records per batch ({st['batches']} batches "
         f"instead of {rr['batches']}). Over {short} ms windows it was {st['imbalance'][short]} "
         f"times the average on its busiest partition (round robin: {rr['imbalance'][short]}); "
         f"over the whole run {st['imbalance_whole_run']} (limit {cfg['evens_out_limit']}): "
         + ("the random sticky choices even out." if st["imbalance_whole_run"] < cfg["evens_out_limit"]
            else f"in {total} records the random sticky choices did not even out yet."))
    result: dict[str, Any] = {"claim": CLAIM, "simulated_ms": clock.now_ms() - START_MS, "partitions": n,
                              "records": total, "windows_ms": list(cfg["windows_ms"]),
                              "evens_out_limit": cfg["evens_out_limit"], "partitioners": runs,
                              "batch_size_factor": round(factor, 2), "pictures": []}
    if plot_dir is not None:
        result["pictures"] = _pictures(plot_dir, runs, cfg, len(arrivals))
    check_claim(factor >= 2, CLAIM, f"sticky batches hold only {factor:.2f} times the records of "
                "round-robin batches")
    check_claim(st["imbalance"][short] > rr["imbalance"][short], CLAIM,
                f"over {short} ms windows sticky ({st['imbalance'][short]}) was not more imbalanced "
                f"than round robin ({rr['imbalance'][short]})")
    check_claim(st["imbalance_whole_run"] < cfg["evens_out_limit"], CLAIM,
                f"over the whole run sticky's busiest partition carried {st['imbalance_whole_run']} "
                f"times the average, not below {cfg['evens_out_limit']}: {total} records make only "
                f"about {switches} sticky switches, too few to even out over {n} partitions")
    return result


def _pictures(plot_dir: str, runs: dict[str, dict], cfg: dict, run_ms: int) -> list[str]:
    colours = fig.colour_map(list(runs))
    figure, (ax,) = fig.figure("Records per batch without keys: per-record round robin against "
                               "sticky (linger.ms=5)")
    top = max(max(r["batch_record_counts"]) for r in runs.values())
    for name, r in runs.items():
        ax.hist(r["batch_record_counts"], bins=[b - 0.5 for b in range(1, top + 2)], alpha=0.6,
                color=colours[name],
                label=f"{name}: {r['records_per_batch_avg']} records per batch on average")
    ax.set_xlabel("records in one batch")
    ax.set_ylabel("batches")
    ax.legend(fontsize=8)
    batches = fig.save(figure, plot_dir, "null-key-batching-batches")

    ws = list(cfg["windows_ms"]) + [run_ms]
    figure = fig.lines(ws, {name: [r["imbalance"][str(w)] for w in cfg["windows_ms"]]
                                  + [r["imbalance_whole_run"]] for name, r in runs.items()},
                       title="Busiest partition over the average, by window length "
                             f"(the last point is the whole run, {run_ms} ms)",
                       xlabel="window length (ms, log scale)",
                       ylabel="max / average records per partition",
                       limit=cfg["evens_out_limit"], limit_label="limit for the whole run")
    figure.axes[0].set_xscale("log")
    imbalance_png = fig.save(figure, plot_dir, "null-key-batching-imbalance")
    return [batches, imbalance_png]


if __name__ == "__main__":
    raise SystemExit(main_for("null-key-batching"))
