"""The demo ``make demo`` runs: a storage round trip through the broker, summarised.

``run_demo(data_dir, seed)`` wipes ``data_dir``, runs the story with a MockClock and a
seeded RNG, prints each step through ``echo`` and returns a JSON-able summary. The same
seed prints the same result.
"""

from __future__ import annotations

import os
import random
import shutil
from typing import Callable, Optional

from broker import Broker
from kafkasim.clock import MockClock

__all__ = ["run_demo"]


def run_demo(data_dir: str, *, seed: int = 42, records: Optional[int] = None, spark: bool = True,
             echo: Optional[Callable[[str], None]] = print) -> dict:
    say = echo or (lambda _s: None)
    n = records or 20_000
    if os.path.isdir(data_dir):
        shutil.rmtree(data_dir)
    rng = random.Random(seed)
    clock = MockClock(1_700_000_000_000)
    summary: dict = {"data_dir": data_dir, "seed": seed, "records": n}
    with Broker(data_dir, clock=clock) as b:
        b.create_topic("orders", partitions=3, configs={"segment.bytes": "65536"})
        say(f"created topic orders (3 partitions, 64 KiB segments) in {data_dir}")
        for start in range(0, n, 500):
            batch = []
            for i in range(start, min(n, start + 500)):
                clock.advance(1)
                batch.append((clock.now_ms(), b"merchant_%04d" % rng.randrange(1000), b"order-%d" % i, ()))
            b.append_records("orders", rng.randrange(3), batch)
        b.flush()
        parts = b.describe_topic("orders")["partitions"]
        total = 0
        for p in parts:
            say(f"  orders-{p['partition']}: offsets {p['log_start_offset']}..{p['log_end_offset']}, "
                f"{p['segments']} segments, {p['size_bytes']} bytes")
            total += p["log_end_offset"]
    with Broker(data_dir, clock=clock) as b:
        read = sum(len(_read_all(b, "orders", p)) for p in range(3))
    say(f"reopened the broker and read back {read} of {total} records")
    summary["read_back"] = read
    summary["partitions"] = parts
    return summary


def _read_all(b: Broker, topic: str, partition: int) -> list:
    out, offset = [], 0
    while True:
        got = b.fetch(topic, partition, offset).records
        if not got:
            return out
        out.extend(got)
        offset = got[-1].offset + 1
