"""Lab: partition-count change — growing a topic mid-stream moves keys and breaks per-key state.

What you will see
-----------------
A payments app keeps a **running total per account** (a stateful consumer, as a Kafka
Streams aggregation does: its state is kept per input partition, in one store per
partition). Producers with the Java default partitioner (murmur2) send ``records_before``
payments per account to a topic with ``before`` (32) partitions. Then the topic must grow to
``after`` (64) partitions, and the lab does it two ways, with the same payments:

1. **forward-only** (``kafka-topics --alter --partitions 64``, ``Broker.create_partitions``):
   once the producer's metadata refreshes (``metadata.max.age.ms``, 5 minutes) the next
   ``records_after`` payments per account go by ``murmur2 % 64``. Half the accounts land on a
   new partition (with 32 → 64 a key stays on ``p`` or moves to ``p + 32``), whose state store
   has never seen them: their running total **restarts from zero** and is wrong. A consumer of
   all partitions can also read an account's new payments before its old ones.
2. **mirroring to a new topic** (dual write, drain, switch): create ``payments-v2`` with 64
   partitions; producers **dual write** every new payment to both topics; the old app
   **drains** the old topic up to the offsets it had when dual writing began and hands its
   totals over as the new app's starting state; the app then **switches** to ``payments-v2``.
   Every account keeps one partition per topic, every total is right, nothing is read out
   of order; the old topic stays complete until it is retired (a way back).

The key-move grid (old partition x new partition) shows where each account went.

Why
---
Kafka orders records only within a partition and maps a key with
``toPositive(murmur2(key)) % numPartitions``; change ``numPartitions`` and a key's history is
split over two partitions that are read (and aggregated) independently. Kafka's docs warn:
"adding partitions doesn't change the partitioning of existing data so this may disturb
consumers if they rely on that partition" (Operations, "Modifying topics"). Remedies:
over-provision partitions up front, or migrate to a new topic as above.

Run it: ``kafkasim scenario run partition-count-change --plot-dir pics``.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Optional

from kafkasim.clock import MockClock
from kafkasim.consumer import Consumer
from kafkasim.partitioning.partitioners import murmur2_partition
from kafkasim.producer import Producer
from kafkasim.scenarios import _figures as fig
from kafkasim.scenarios._common import START_MS, check_claim, fresh_broker, main_for, table
from kafkasim.types import SEQUENCE_HEADER, TopicPartition

__all__ = ["PARAMS", "CLAIM", "run", "make_keys"]

CLAIM = ("Growing a topic from 32 to 64 partitions mid-stream moves half the keys, so a per-key "
         "running total kept per partition goes wrong for every moved key, while mirroring to a "
         "new 64-partition topic (dual write, drain, switch) keeps every total right.")
"""The lab's point, asserted by :func:`run`."""

PARAMS: dict[str, Any] = {
    "keys": 400,              # accounts
    "before": 32,             # partitions at first
    "after": 64,              # partitions after the change
    "records_before": 3,      # payments per account before the change
    "records_after": 3,       # payments per account after it
    "max_poll_records": 50,   # the consumers' batch size
}


def make_keys(seed: int, n: int) -> list[bytes]:
    """The lab's distinct accounts ``account-XXXXXXXX``, in a seeded order."""
    rng = random.Random(seed)
    return list(dict.fromkeys(f"account-{rng.randrange(10**8):08d}".encode() for _ in range(n)))


def _read(broker, topic: str, parts: int, max_poll: int, until: Optional[dict] = None) -> list:
    """``(key, seq, partition, amount)`` in the order a consumer of every partition gets them
    (up to the offsets ``until[p]`` if given: the drain)."""
    c = Consumer(broker, client_id=f"app-{topic}", auto_offset_reset="earliest",
                 max_poll_records=max_poll)
    c.assign([TopicPartition(topic, p) for p in range(parts)])
    out = []
    while batch := c.poll():
        for tp, recs in batch.items():
            for r in recs:
                if until is None or r.offset < until[tp.partition]:
                    out.append((r.key, int(dict(r.headers)[SEQUENCE_HEADER]), tp.partition,
                                int(r.value)))
    c.close()
    return out


def _totals(delivered: list, start: Optional[dict] = None, parts: int = 0,
            stores: Optional[dict] = None) -> dict[bytes, int]:
    """The app: one state store per partition (``stores``, filled in); the total it last
    reported for each key."""
    stores = {} if stores is None else stores
    for k, total in (start or {}).items():           # state handed over at a switch
        stores.setdefault(murmur2_partition(k, parts), {})[k] = total
    reported: dict[bytes, int] = dict(start or {})
    for k, _, p, amount in delivered:
        store = stores.setdefault(p, {})
        store[k] = store.get(k, 0) + amount
        reported[k] = store[k]
    return reported


def _inversions(delivered: list) -> set:
    last: dict[bytes, int] = {}
    out = set()
    for k, seq, _, _ in delivered:
        if seq < last.get(k, -1):
            out.add(k)
        last[k] = max(seq, last.get(k, -1))
    return out


def run(data_dir: str, *, seed: int = 42, echo: Callable[[str], Any] = print,
        plot_dir: Optional[str] = None, **params: Any) -> dict:
    """Run the lab (see the module docstring); return moved keys, totals and order per way."""
    cfg = {**PARAMS, **params}
    n0, n1, rb, ra = cfg["before"], cfg["after"], cfg["records_before"], cfg["records_after"]
    clock = MockClock(START_MS)
    keys = make_keys(seed, cfg["keys"])
    rng = random.Random(f"{seed}:amounts")
    amounts = {k: [rng.randint(1, 100) for _ in range(rb + ra)] for k in keys}
    truth = {k: sum(a) for k, a in amounts.items()}
    with fresh_broker(data_dir, clock) as broker:
        # 1. forward-only
        broker.create_topic("payments", n0)
        prod = Producer(broker, client_id="payments-app", stamp_headers=True, seed=seed, linger_ms=0)
        for i in range(rb):
            for k in keys:
                prod.send("payments", key=k, value=str(amounts[k][i]).encode())
        prod.flush()
        broker.create_partitions("payments", n1)
        clock.advance(prod.config["metadata_max_age_ms"])   # until then it still uses n0
        for i in range(rb, rb + ra):
            for k in keys:
                prod.send("payments", key=k, value=str(amounts[k][i]).encode())
        prod.close()
        fwd = _read(broker, "payments", n1, cfg["max_poll_records"])

        # 2. mirror: dual write, drain, switch
        broker.create_topic("payments-old", n0)
        prod = Producer(broker, client_id="payments-app-2", stamp_headers=True, seed=seed, linger_ms=0)
        for i in range(rb):
            for k in keys:
                prod.send("payments-old", key=k, value=str(amounts[k][i]).encode())
        prod.flush()
        broker.create_topic("payments-v2", n1)
        mark = {q["partition"]: q["log_end_offset"]
                for q in broker.describe_topic("payments-old")["partitions"]}
        for i in range(rb, rb + ra):                       # dual write
            for k in keys:
                for t in ("payments-old", "payments-v2"):
                    prod.send(t, key=k, value=str(amounts[k][i]).encode())
        prod.close()
        drained = _read(broker, "payments-old", n0, cfg["max_poll_records"], until=mark)
        handover = _totals(drained)                       # the old app's totals at the mark
        v2 = _read(broker, "payments-v2", n1, cfg["max_poll_records"])

    fwd_stores: dict[int, dict[bytes, int]] = {}
    fwd_totals = _totals(fwd, stores=fwd_stores)
    mir_totals = _totals(v2, start=handover, parts=n1)
    old_p = {k: murmur2_partition(k, n0) for k in keys}
    new_p = {k: murmur2_partition(k, n1) for k in keys}
    seen_p: dict[bytes, set] = {}
    for k, _, p, _ in fwd:
        seen_p.setdefault(k, set()).add(p)
    moved = sorted(k for k in keys if len(seen_p[k]) > 1)
    predicted = sorted(k for k in keys if old_p[k] != new_p[k])
    ways = {
        "forward_only": {"keys_moved": len(moved),
                         "keys_wrong_total": sum(fwd_totals[k] != truth[k] for k in keys),
                         "keys_out_of_order": len(_inversions(fwd))},
        "mirror": {"keys_moved": 0,
                   "keys_wrong_total": sum(mir_totals[k] != truth[k] for k in keys),
                   "keys_out_of_order": len(_inversions(v2)),
                   "drained_records": len(drained), "v2_records": len(v2)},
    }
    grid = [[sum(1 for k in keys if old_p[k] == a and new_p[k] == b) for b in range(n1)]
            for a in range(n0)]
    example = next((k for k in moved if fwd_totals[k] != truth[k]), None)
    ex = None if example is None else {
        "key": example.decode(), "old_partition": old_p[example], "new_partition": new_p[example],
        "amounts": amounts[example], "true_total": truth[example],
        "forward_only_total": fwd_totals[example],
        "forward_only_store_totals": {str(p): fwd_stores[p][example]
                                      for p in (old_p[example], new_p[example])},
        "mirror_total": mir_totals[example]}

    f, m = ways["forward_only"], ways["mirror"]
    echo(f"{len(keys)} accounts, {rb} payments each on {n0} partitions, then {ra} more each "
         f"after the change to {n1} partitions.\n")
    echo(table(["way", "accounts moved", "accounts with a wrong total", "accounts read out of order"],
               [["forward-only (add partitions)", f["keys_moved"], f["keys_wrong_total"],
                 f["keys_out_of_order"]],
                ["mirror to payments-v2 (dual write, drain, switch)", m["keys_moved"],
                 m["keys_wrong_total"], m["keys_out_of_order"]]]))
    echo(f"\nmurmur2 says {len(predicted)} of {len(keys)} accounts change partition "
         f"({len(predicted) / len(keys):.0%}; {_expected_moved(n0, n1):.0%} expected for a "
         f"uniform hash); the log shows {len(moved)}.")
    if ex:
        old_t, new_t = ex["forward_only_store_totals"].values()
        echo(f"For example {ex['key']} moved from partition {ex['old_partition']} to "
             f"{ex['new_partition']}: its payments add up to {ex['true_total']}, but the "
             f"forward-only app holds two partial totals, {old_t} in partition "
             f"{ex['old_partition']}'s store and {new_t} in partition {ex['new_partition']}'s, and "
             f"last reported {ex['forward_only_total']}; the mirrored app reports "
             f"{ex['mirror_total']}.")
    echo(f"The mirror's old app drained {m['drained_records']} payments up to the dual-write "
         f"mark and handed its totals over; the new app then read {m['v2_records']} payments "
         f"from payments-v2.")

    pictures = []
    if plot_dir is not None:
        pictures.append(fig.save(fig.grid(
            grid, [str(p) for p in range(n0)], [str(p) for p in range(n1)],
            title=f"Where each account goes when {n0} partitions become {n1} "
                  f"(diagonal: stayed; {len(predicted)} of {len(keys)} moved)",
            xlabel=f"partition after (of {n1})", ylabel=f"partition before (of {n0})",
            colourbar="accounts", annotate=n0 * n1 <= 400), plot_dir, "partition-count-change-moves"))
        figure, axes = fig.figure("Growing the topic in place against mirroring to a new topic "
                                  f"({len(keys)} accounts)", 1, 2, sharey=True)
        labels = ["moved", "wrong total", "out of order"]
        for ax, (name, w) in zip(axes, [("forward-only", f), ("mirror (dual write, drain, switch)", m)]):
            fig.bars(labels, [w["keys_moved"], w["keys_wrong_total"], w["keys_out_of_order"]],
                     ax=ax, title=name, xlabel="what happened to the account",
                     ylabel="accounts", average=False)
        pictures.append(fig.save(figure, plot_dir, "partition-count-change-totals"))
    result = {"claim": CLAIM, "pictures": pictures, "simulated_ms": clock.now_ms() - START_MS,
              "keys": len(keys), "before": n0, "after": n1, "moved_keys": len(moved),
              "moved_fraction": round(len(moved) / len(keys), 4),
              "predicted_moved_keys": len(predicted), "moved_equals_prediction": moved == predicted,
              "expected_moved_fraction": round(_expected_moved(n0, n1), 4),
              "ways": ways, "example": ex, "move_grid": grid}
    check_claim(moved == predicted and f["keys_wrong_total"] == len(moved) > 0
                and m["keys_wrong_total"] == 0 and m["keys_out_of_order"] == 0, CLAIM,
                f"moved {len(moved)} (murmur2 says {len(predicted)}), wrong totals forward-only "
                f"{f['keys_wrong_total']}, mirror {m['keys_wrong_total']}, mirror out of order "
                f"{m['keys_out_of_order']}")
    return result


def _expected_moved(n0: int, n1: int) -> float:
    """For a uniform hash: the share of residues mod lcm(n0, n1) with r % n0 != r % n1."""
    from math import lcm
    m = lcm(n0, n1)
    return sum(1 for r in range(m) if r % n0 != r % n1) / m


if __name__ == "__main__":
    raise SystemExit(main_for("add_partitions"))
