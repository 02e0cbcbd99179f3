"""Lab: adding partitions moves keys — and breaks per-key order across the move.

What you will see
-----------------
A producer with the Java default partitioner (murmur2) sends ``records_before``
records for each of ``keys`` keys to a topic with 6 partitions. Then the topic grows
to 8 partitions (``Broker.create_partitions``, i.e. ``kafka-topics --alter
--partitions 8``); once the producer's metadata refreshes (``metadata.max.age.ms``,
5 minutes by default — until then it keeps using 6) it sends ``records_after`` more
records per key. The lab reports:

- the fraction of keys whose new records land on a different partition than their
  old ones, measured from the log, next to a direct computation
  ``murmur2(k) % 6 != murmur2(k) % 8`` (they must agree) — about 3 in 4 keys move,
  because a hash stays put only if ``h mod 24 < 6``;
- what a consumer reading every partition sees: for how many keys it receives a
  *later* record (on the new partition) before an *earlier* one (still unread on the
  old partition). Each record carries the producer's per-key sequence header
  (``kafkasim.seq``), so the inversion is measured, not assumed.

Why
---
Kafka guarantees order only within a partition. The key → partition mapping is
``toPositive(murmur2(key)) % numPartitions``, so changing ``numPartitions`` remaps most
keys, and a key's history is now split over two partitions that are read
independently. Kafka's documentation warns about exactly this ("Be aware that one use
case for partitions is to semantically partition data, and adding partitions doesn't
change the partitioning of existing data so this may disturb consumers if they rely on
that partition", Operations → "Modifying topics"). Usual remedies: over-provision
partitions up front, or create a new topic and migrate, or drain the old partitions
before consuming the new ones.

Run it: ``kafkasim scenario run add_partitions``.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Optional

from kafkasim.consumer import Consumer
from kafkasim.clock import MockClock
from kafkasim.types import SEQUENCE_HEADER, TopicPartition
from kafkasim.producer import Producer
from kafkasim.partitioning.partitioners import murmur2_partition
from kafkasim.scenarios._common import START_MS, fresh_broker, main_for, table

__all__ = ["PARAMS", "CLAIM", "run", "make_keys"]

CLAIM = ("Growing a topic's partition count mid-stream moves most keys to another partition, so a consumer sees a key's records out of order and a per-key total goes wrong, while mirroring to a new topic with the new count keeps every key on one partition.")
"""The lab's point, asserted by :func:`run`."""

PARAMS: dict[str, Any] = {
    "keys": 400,
    "before": 6,              # partitions at first
    "after": 8,               # partitions after create_partitions
    "records_before": 3,      # records per key before the change
    "records_after": 3,       # records per key after it
    "max_poll_records": 50,   # the reading consumer's batch size
}


def make_keys(seed: int, n: int) -> list[bytes]:
    """The lab's distinct keys ``user-XXXXXXXX``, in a seeded order (``random.Random(seed)``)."""
    rng = random.Random(seed)
    return list(dict.fromkeys(f"user-{rng.randrange(10**8):08d}".encode() for _ in range(n)))


def run(data_dir: str, *, seed: int = 42, echo: Callable[[str], Any] = print,
        plot_dir: Optional[str] = None, **params: Any) -> dict:
    """Run the lab (see the module docstring); return moved-key and order figures."""
    cfg = {**PARAMS, **params}
    n0, n1 = cfg["before"], cfg["after"]
    clock = MockClock(START_MS)
    keys = make_keys(seed, cfg["keys"])
    with fresh_broker(data_dir, clock) as broker:
        broker.create_topic("orders", n0)
        producer = Producer(broker, client_id="orders-app", stamp_headers=True, seed=seed,
                            linger_ms=0)
        for _ in range(cfg["records_before"]):
            for k in keys:
                producer.send("orders", key=k, value=b"before")
        producer.flush()
        broker.create_partitions("orders", n1)
        # the producer still believes in n0 partitions until its metadata is refreshed
        clock.advance(producer.config["metadata_max_age_ms"])
        for _ in range(cfg["records_after"]):
            for k in keys:
                producer.send("orders", key=k, value=b"after")
        producer.close()

        # where did each key's records land? (read every partition from the start)
        reader = Consumer(broker, client_id="reader", auto_offset_reset="earliest",
                          max_poll_records=cfg["max_poll_records"])
        reader.assign([TopicPartition("orders", p) for p in range(n1)])
        delivered = []            # (key, seq, partition) in the order the consumer returns them
        while True:
            batch = reader.poll()
            if not batch:
                break
            for tp, recs in batch.items():
                for r in recs:
                    seq = int(dict(r.headers)[SEQUENCE_HEADER])
                    delivered.append((r.key, seq, tp.partition))
        reader.close()

    rb = cfg["records_before"]
    old_part: dict[bytes, set] = {}
    new_part: dict[bytes, set] = {}
    for k, seq, p in delivered:
        (old_part if seq < rb else new_part).setdefault(k, set()).add(p)
    moved = sorted(k for k in keys if old_part[k] != new_part[k])
    predicted = sorted(k for k in keys if murmur2_partition(k, n0) != murmur2_partition(k, n1))
    inverted: set[bytes] = set()
    last_seq: dict[bytes, int] = {}
    for k, seq, _ in delivered:
        if seq < last_seq.get(k, -1):
            inverted.add(k)
        last_seq[k] = max(seq, last_seq.get(k, -1))
    examples = []
    for k in sorted(inverted)[:3]:
        order = [seq for kk, seq, _ in delivered if kk == k]
        examples.append({"key": k.decode(), "old_partition": sorted(old_part[k])[0],
                         "new_partition": sorted(new_part[k])[0], "seq_order_seen": order})

    frac = len(moved) / len(keys)
    echo(f"{len(keys)} keys, {rb} records each on {n0} partitions, then {cfg['records_after']} "
         f"each after growing to {n1}\n")
    echo(table(["", "keys", "fraction"],
               [["moved partition (measured in the log)", len(moved), f"{frac:.3f}"],
                [f"murmur2 % {n0} != murmur2 % {n1} (computed)", len(predicted),
                 f"{len(predicted) / len(keys):.3f}"],
                ["expected for a uniform hash", "", f"{_expected_moved(n0, n1):.3f}"],
                ["seen out of order by a consumer of all partitions", len(inverted),
                 f"{len(inverted) / len(keys):.3f}"]]))
    echo("\nExamples (per-key sequence numbers in the order the consumer returned them):")
    for e in examples:
        echo(f"  {e['key']}: partition {e['old_partition']} → {e['new_partition']}, "
             f"seen {e['seq_order_seen']}")
    echo(f"\n{frac:.0%} of the keys now live on a new partition. Kafka orders records only "
         "within a partition, so a consumer that reads both may return a key's new records "
         "before its old ones.")
    return {"simulated_ms": clock.now_ms() - START_MS,
            "keys": len(keys), "before": n0, "after": n1, "moved_keys": len(moved),
            "moved_fraction": round(frac, 4),
            "predicted_moved_keys": len(predicted),
            "expected_moved_fraction": round(_expected_moved(n0, n1), 4),
            "moved_equals_prediction": moved == predicted,
            "keys_seen_out_of_order": len(inverted), "examples": examples}


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


def _expected_moved(n0: int, n1: int) -> float:
    """For a uniform hash: the share of residues mod lcm(n0, n1) with r % n0 != r % n1."""
    lcm = n0 * n1 // _gcd(n0, n1)
    return sum(1 for r in range(lcm) if r % n0 != r % n1) / lcm


if __name__ == "__main__":
    raise SystemExit(main_for("add_partitions"))
