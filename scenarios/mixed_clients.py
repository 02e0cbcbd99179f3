"""Lab: mixed clients — a Java producer and a librdkafka producer split the same keys.

What you will see
-----------------
Two producers write the same ``keys`` keys to one topic with ``partitions``
partitions: one with the **Java client's default** partitioner (murmur2:
``toPositive(murmur2(key)) % n``) and one with **librdkafka's default**
``consistent_random`` (``crc32(key) % n``; used by confluent-kafka-python, the Go,
.NET and C/C++ clients built on librdkafka). The lab reads the topic back and counts
the keys whose records sit on **two** partitions — for those keys there is no
per-key order any more, and a consumer or a compacted topic sees two histories.

Why
---
The partition of a key is decided by the *client*, not the broker, and the clients'
default hash functions differ. With two unrelated hashes a key agrees only by chance
(about ``1/partitions`` of keys), so roughly ``1 - 1/partitions`` of the keys are
split. The fix is configuration: set librdkafka's ``partitioner=murmur2_random`` (its
Java-compatible partitioner) everywhere, or give the Java producer a CRC32
partitioner; the lab shows the counts for ``murmur2_random`` too (zero split keys).

Kafka references: Java ``BuiltInPartitioner``; librdkafka CONFIGURATION.md
(``partitioner``: default ``consistent_random``; ``murmur2_random`` "Java Producer
compatible").

The picture: for every key, the partition each client picks (a grid of keys by Java
partition × other client's partition); keys off the diagonal are split.

Run it: ``kafkasim scenario run mixed-clients --plot-dir pics``.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Optional

from kafkasim.consumer import Consumer
from kafkasim.clock import MockClock
from kafkasim.types import PRODUCER_HEADER, TopicPartition
from kafkasim.producer import Producer
from kafkasim.partitioning.partitioners import partition_for_key
from kafkasim.scenarios import _figures as fig
from kafkasim.scenarios._common import START_MS, check_claim, fresh_broker, main_for, table

__all__ = ["PARAMS", "CLAIM", "run", "make_keys"]

CLAIM = ("A Java producer (murmur2) and a librdkafka producer (consistent_random) put most keys on two different partitions, and murmur2_random puts none there.")
"""The lab's point, asserted by :func:`run`."""

PARAMS: dict[str, Any] = {
    "keys": 1000,
    "partitions": 6,
    "records_per_key": 2,     # per producer
}


def _split_keys(broker, topic: str, n: int) -> tuple[dict[bytes, set], dict[str, int]]:
    """key → set of partitions, and records per producer, read back from the log."""
    reader = Consumer(broker, client_id="reader", auto_offset_reset="earliest", max_poll_records=5000)
    reader.assign([TopicPartition(topic, p) for p in range(n)])
    where: dict[bytes, set] = {}
    per_producer: dict[str, int] = {}
    while True:
        batch = reader.poll()
        if not batch:
            break
        for tp, recs in batch.items():
            for r in recs:
                where.setdefault(r.key, set()).add(tp.partition)
                who = dict(r.headers)[PRODUCER_HEADER].decode()
                per_producer[who] = per_producer.get(who, 0) + 1
    reader.close()
    return where, per_producer


def make_keys(seed: int, n: int) -> list[bytes]:
    """The lab's distinct keys ``sensor-XXXXXX``, in a seeded order (``random.Random(seed)``)."""
    rng = random.Random(seed)
    return list(dict.fromkeys(f"sensor-{rng.randrange(10**6):06d}".encode() for _ in range(n)))


def run(data_dir: str, *, seed: int = 42, echo: Callable[[str], Any] = print,
        plot_dir: Optional[str] = None, **params: Any) -> dict:
    """Run the lab (see the module docstring); return split-key counts per client pair."""
    cfg = {**PARAMS, **params}
    n = cfg["partitions"]
    clock = MockClock(START_MS)
    keys = make_keys(seed, cfg["keys"])
    pairs = [("murmur2", "consistent_random"), ("murmur2", "murmur2_random")]
    results = []
    with fresh_broker(data_dir, clock) as broker:
        for i, (java, other) in enumerate(pairs):
            topic = f"readings-{other}"
            broker.create_topic(topic, n)
            producers = [Producer(broker, client_id=f"java-{java}", partitioner=java, seed=seed,
                                  stamp_headers=True),
                         Producer(broker, client_id=f"librdkafka-{other}", partitioner=other,
                                  seed=seed, stamp_headers=True)]
            for _ in range(cfg["records_per_key"]):
                for k in keys:
                    for p in producers:
                        p.send(topic, key=k, value=b"reading")
            for p in producers:
                p.close()
            where, per_producer = _split_keys(broker, topic, n)
            split = sorted(k for k in keys if len(where[k]) > 1)
            predicted = sorted(k for k in keys
                               if partition_for_key(k, n, java) != partition_for_key(k, n, other))
            grid = [[sum(1 for k in keys if partition_for_key(k, n, java) == a
                         and partition_for_key(k, n, other) == b) for b in range(n)]
                    for a in range(n)]
            results.append({"java": java, "other": other, "topic": topic, "key_grid": grid,
                            "split_keys": len(split), "split_fraction": round(len(split) / len(keys), 4),
                            "predicted_split_keys": len(predicted),
                            "records_per_producer": dict(sorted(per_producer.items())),
                            "examples": [{"key": k.decode(), "partitions": sorted(where[k]),
                                          java: partition_for_key(k, n, java),
                                          other: partition_for_key(k, n, other)}
                                         for k in split[:3]]})
    echo(f"{len(keys)} keys, {n} partitions, {cfg['records_per_key']} records per key from each "
         f"producer.\n")
    echo(table(["Java producer", "other producer", "keys on two partitions", "share",
                "computed from the hashes"],
               [[r["java"], r["other"], r["split_keys"], f"{r['split_fraction']:.1%}",
                 r["predicted_split_keys"]] for r in results]))
    echo(f"\nFor two unrelated hashes, expect about 1 - 1/{n} = {1 - 1 / n:.1%} of the keys split.")
    if results[0]["examples"]:
        echo("For example:")
        for e in results[0]["examples"]:
            echo(f"  {e['key']}: murmur2 picks partition {e['murmur2']}, consistent_random "
                 f"partition {e['consistent_random']}")
    echo("Set librdkafka's partitioner=murmur2_random to agree with Java clients: "
         f"{results[1]['split_keys']} keys split then.")
    pictures = []
    if plot_dir is not None:
        figure, axes = fig.figure(f"Where two clients put the same {len(keys)} keys "
                                  f"({n} partitions; off the diagonal: the key is split)", 1, 2,
                                  size=(13, 5.5))
        for ax, r in zip(axes, results):
            fig.grid(r["key_grid"], [str(p) for p in range(n)], [str(p) for p in range(n)],
                     ax=ax, title=f"{r['java']} vs {r['other']}: {r['split_keys']} keys split",
                     xlabel=f"partition picked by {r['other']}",
                     ylabel=f"partition picked by {r['java']} (Java)", colourbar="keys")
        pictures.append(fig.save(figure, plot_dir, "mixed-clients"))
    crc, compatible = results
    result = {"claim": CLAIM, "pictures": pictures, "simulated_ms": clock.now_ms() - START_MS,
              "keys": len(keys), "partitions": n, "pairs": results}
    check_claim(crc["split_keys"] == crc["predicted_split_keys"]
                and crc["split_fraction"] > 0.5 and abs(crc["split_fraction"] - (1 - 1 / n)) < 0.1
                and compatible["split_keys"] == 0, CLAIM,
                f"split with consistent_random {crc['split_keys']} ({crc['split_fraction']:.1%}, "
                f"computed {crc['predicted_split_keys']}), with murmur2_random {compatible['split_keys']}")
    return result


if __name__ == "__main__":
    raise SystemExit(main_for("mixed_clients"))
