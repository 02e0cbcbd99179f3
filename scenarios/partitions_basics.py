"""Lab: partitions basics — the same key always lands on the same partition; order is per key, not global.

What you will see
-----------------
A producer sends ``records`` records for ``keys`` user ids to a topic with
``partitions`` partitions, one record per millisecond, numbered 0, 1, 2 … in send order
(each value a msgpack map ``{"send_no": n, "key_seq": k}``, k counting the key's own records:
``value_serializer=msgpack.dumps`` / ``value_deserializer=msgpack.loads``, as in kafka-python's README).
The Java client's default partitioner (**murmur2**) picks the partition from the key
alone: ``toPositive(murmur2(key)) % partitions`` (Kafka's
``BuiltInPartitioner.partitionForKey``). The first table shows each key, the one
partition all its records went to, and how many records that was.

Then a single consumer reads the whole topic, ``max_poll_records`` at a time, round
robin over the partitions as Kafka's fetcher does. The second table shows the first
records in the order they were consumed: send numbers jump back and forth, because
the consumer drains partition 0 a little, then partition 1, and so on.

Why
---
A partition is an append-only log: records of one partition are stored, and read, in
the order they were appended. Because a key always maps to the same partition, every
key's records are read in the order they were sent — **per-key order holds**. Records
on *different* partitions have no order relative to each other: the consumer
interleaves partitions however its fetches fall, so **there is no global order**
across a topic (only a topic with one partition has a total order, and it cannot be
read by more than one consumer of a group).

The picture ``partitions-basics-order.png`` plots send number against consume position,
one colour per partition: each colour rises (order within a partition), the cloud as a
whole does not (no order across partitions). ``partitions-basics-keys.png`` is the key →
partition grid: one filled cell per row.

Try ``--param partitioner=round_robin_all`` (Kafka's ``RoundRobinPartitioner``, which
ignores keys): a key's records are then spread over every partition, per-key order is
lost, and the lab's claim check fails.

Kafka references: ``BuiltInPartitioner.partitionForKey``, KIP-480/KIP-794; Kafka docs
"Topics and Logs" (order is guaranteed only within a partition).

Invariants: the same seed and params give the same text, JSON and PNG bytes; the lab
writes only into its data dir (wiped first) and ``plot_dir``.
Thread-safety: one run per data dir at a time; the module keeps no state between runs.

Run it: ``kafkasim scenario run partitions-basics`` or
``python -m kafkasim.scenarios.partitions_basics``.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from typing import Any, Callable, Optional

import msgpack

from kafkasim.arguments import check_arg
from kafkasim.consumer import Consumer
from kafkasim.partitioning.partitioners import murmur2_partition
from kafkasim.producer import Producer
from kafkasim.scenarios import _figures as fig
from kafkasim.scenarios._common import START_MS, check_claim, fresh_broker, main_for, table, lab_clock
from kafkasim.types import TopicPartition

__all__ = ["PARAMS", "CLAIM", "run"]

PARAMS: dict[str, Any] = {
    "partitions": 4,            # partitions of the topic
    "keys": 6,                  # distinct keys (user ids)
    "records": 60,              # records sent, one per ms
    "max_poll_records": 4,      # records one poll() returns at most
    "partitioner": "murmur2",   # the producer's partitioner (round_robin_all breaks the claim)
}

CLAIM = ("Every record of a key lands on the same partition, so each key's records are consumed "
         "in send order, while records of different partitions are consumed out of send order.")


def run(data_dir: str, *, seed: int = 42, echo: Callable[[str], Any] = print,
        plot_dir: Optional[str] = None, **params: Any) -> dict:
    """Run the lab (see the module docstring); return the key → partition map and the consumed order."""
    cfg = {**PARAMS, **params}
    for k in ("partitions", "keys", "records", "max_poll_records"):
        check_arg(k, cfg[k], "int", min=1)
    n = cfg["partitions"]
    rng = random.Random(seed)
    clock = lab_clock()
    names = [f"user-{i}" for i in range(1, cfg["keys"] + 1)]
    sent = [rng.choice(names) for _ in range(cfg["records"])]

    with fresh_broker(data_dir, clock) as broker:
        broker.create_topic("clicks", n)
        producer = Producer(broker, client_id="lab-clicks", partitioner=cfg["partitioner"],
                            seed=seed, clock=clock, linger_ms=0, value_serializer=msgpack.dumps)
        per_key: Counter = Counter()
        for i, key in enumerate(sent):
            producer.send("clicks", key=key.encode(), value={"send_no": i, "key_seq": per_key[key]})
            per_key[key] += 1
            clock.advance(1)
        producer.close()
        consumer = Consumer(broker, client_id="lab-reader", clock=clock, value_deserializer=msgpack.loads,
                            max_poll_records=cfg["max_poll_records"])
        consumer.assign([TopicPartition("clicks", p) for p in range(n)])
        consumer.seek_to_beginning()
        consumed: list[dict] = []
        while len(consumed) < len(sent):
            batch = consumer.poll()
            if not batch:
                break
            for tp, recs in batch.items():
                for r in recs:
                    consumed.append({"send_no": r.value["send_no"], "key_seq": r.value["key_seq"],
                                     "key": r.key.decode(),
                                     "partition": r.partition, "offset": r.offset})
        consumer.close()

    partitions_of: dict[str, set] = defaultdict(set)
    for c in consumed:
        partitions_of[c["key"]].add(c["partition"])
    key_rows = [{"key": k, "partitions": sorted(partitions_of[k]), "records": per_key[k],
                 "murmur2_partition": murmur2_partition(k.encode(), n)} for k in names if per_key[k]]
    last_seq: dict[str, int] = {}
    key_order_breaks = 0
    for c in consumed:
        if c["key_seq"] < last_seq.get(c["key"], -1):
            key_order_breaks += 1
        last_seq[c["key"]] = max(c["key_seq"], last_seq.get(c["key"], -1))
    high = -1
    global_breaks = 0
    for c in consumed:
        if c["send_no"] < high:
            global_breaks += 1
        high = max(high, c["send_no"])

    echo(f"{len(sent)} records for {len(key_rows)} keys sent to {n} partitions with the "
         f"{cfg['partitioner']} partitioner, one record per millisecond.\n")
    echo("Where each key's records went:")
    echo(table(["key", "partitions used", "records", "murmur2 says"],
               [[r["key"], " and ".join(map(str, r["partitions"])), r["records"],
                 r["murmur2_partition"]] for r in key_rows]))
    show = consumed[:12]
    echo(f"\nThe first {len(show)} records in the order one consumer read them "
         f"({cfg['max_poll_records']} records per poll):")
    echo(table(["read as", "send number", "key", "partition", "offset", "record of its key"],
               [[i, c["send_no"], c["key"], c["partition"], c["offset"], f"#{c['key_seq']}"]
                for i, c in enumerate(show)]))
    echo(f"\nPer key: {key_order_breaks} of {len(consumed)} records were read before an earlier "
         f"record of the same key. Across keys: {global_breaks} of {len(consumed)} records were "
         f"read after a record that was sent later.")

    one_partition = all(len(r["partitions"]) == 1 for r in key_rows)
    result: dict[str, Any] = {
        "claim": CLAIM, "simulated_ms": clock.now_ms() - START_MS, "partitions": n,
        "partitioner": cfg["partitioner"], "records": len(sent), "keys": key_rows,
        "consumed": consumed, "key_order_breaks": key_order_breaks,
        "global_order_breaks": global_breaks, "pictures": [],
    }
    if plot_dir is not None:
        result["pictures"] = _pictures(plot_dir, consumed, key_rows, n)
    spread = [r["key"] for r in key_rows if len(r["partitions"]) > 1]
    check_claim(one_partition and not key_order_breaks, CLAIM,
                f"with the {cfg['partitioner']} partitioner {len(spread)} keys were spread over several "
                f"partitions ({', '.join(spread[:3]) or 'none'}) and {key_order_breaks} records were "
                "read before an earlier record of their key")
    check_claim(n == 1 or global_breaks > 0, CLAIM,
                f"all {len(consumed)} records from {n} partitions were read in send order")
    if cfg["partitioner"] == "murmur2":
        wrong = [r["key"] for r in key_rows if r["partitions"] != [r["murmur2_partition"]]]
        check_claim(not wrong, CLAIM, f"keys {', '.join(wrong)} are not on their murmur2 partition")
    if n == 1:
        echo("\nSo: with a single partition the topic is one log and was read in send order; "
             "the price of that total order is that only one consumer of a group can read it.")
    else:
        echo(f"\nSo: each key stayed on one partition and its records were read in the order they "
             f"were sent; the topic as a whole was read out of order {global_breaks} times, because "
             "Kafka orders records only within a partition.")
    return result


def _pictures(plot_dir: str, consumed: list[dict], key_rows: list[dict], n: int) -> list[str]:
    figure, (ax,) = fig.figure("Read order against send order: ordered within a partition, not across")
    colours = fig.colour_map([f"partition {p}" for p in range(n)])
    for p in range(n):
        pts = [(i, c["send_no"]) for i, c in enumerate(consumed) if c["partition"] == p]
        if pts:
            ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", markersize=3, linewidth=1,
                    color=colours[f"partition {p}"], label=f"partition {p}")
    ax.set_xlabel("position in the consumer's read order (records)")
    ax.set_ylabel("send number (records, one per ms)")
    ax.legend(loc="upper left", fontsize=8)
    order = fig.save(figure, plot_dir, "partitions-basics-order")
    grid = [[sum(1 for c in consumed if c["key"] == r["key"] and c["partition"] == p) for p in range(n)]
            for r in key_rows]
    keys = fig.save(fig.grid(grid, [r["key"] for r in key_rows], [f"p{p}" for p in range(n)],
                             title="Records of each key per partition: one filled cell per key",
                             xlabel="partition", ylabel="key", colourbar="records"),
                    plot_dir, "partitions-basics-keys")
    return [order, keys]


if __name__ == "__main__":
    raise SystemExit(main_for("partitions-basics"))
