"""Live-view benchmarks: how fast ``DataDirWatcher`` catches up on a data dir, and what an idle poll costs.

Figures (``python -m benchmarks view``):

- ``view_catch_up_records_per_s``: records per second through ``DataDirWatcher.poll()`` (until it
  is no longer ``behind``) over a data dir of 200,000 records (8 partitions, 16-byte keys, 100-byte
  values, batches of 500, the 50 partitions of ``__consumer_offsets`` beside them). Baseline,
  measured in the same run: the bare minimum any reader of those files does, a framing walk
  (``BatchIterator``, CRC checked) plus ``decode_columns`` of every batch, with no bookkeeping.
  Target: ratio ≥ 0.25 (the watcher also routes every key through murmur2 and counts producers).
- ``view_idle_poll_ms``: one poll when nothing changed (what the view pays every 250 ms).
  Baseline: listing the same partition directories and stat-ing their segment files.
  Target: ≤ 25 ms.

Best of 3 rounds each; the scratch directory is deleted afterwards.
"""

from __future__ import annotations

import os
import time

from benchmarks.common import best_of, figure, scratch_dir
from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.records import record_batch as rb
from kafkasim.records.framing import BatchIterator
from kafkasim.storage import layout
from kafkasim.view.snapshot import DataDirWatcher

__all__ = ["run"]

N_RECORDS = 200_000
PARTITIONS = 8
BATCH = 500


def _fill(data_dir: str) -> None:
    clock = MockClock(1_700_000_000_000)
    with Broker(data_dir, clock=clock) as broker:
        broker.create_topic("orders", PARTITIONS)
        broker.create_topic("__consumer_offsets", 50)
        value = bytes(range(100))
        for i in range(0, N_RECORDS, BATCH):
            broker.append_records("orders", (i // BATCH) % PARTITIONS,
                                  [(clock.now_ms(), b"key-%012d" % (j % 5000), value, ()) for j in range(i, i + BATCH)])
        broker.flush()


def _bare_read(data_dir: str) -> int:
    n = 0
    for _, path in layout.list_partitions(data_dir):
        for _, seg in layout.list_segments(path):
            with open(seg, "rb") as f:
                data = f.read()
            for pos, h in BatchIterator(data, where=seg):
                n += len(rb.decode_columns(data, pos, h, where=seg)[0])
    return n


def _catch_up(data_dir: str) -> int:
    w = DataDirWatcher(data_dir, clock=MockClock(0))
    snap = w.poll()
    while snap["behind"]:
        snap = w.poll()
    return sum(t["records"] for t in snap["topics"])


def _bare_listing(data_dir: str) -> None:
    for _, path in layout.list_partitions(data_dir):
        for _, seg in layout.list_segments(path):
            os.stat(seg)


def run() -> dict:
    with scratch_dir() as d:
        data_dir = os.path.join(d, "data")
        _fill(data_dir)
        assert _bare_read(data_dir) == N_RECORDS and _catch_up(data_dir) == N_RECORDS
        bare_s = best_of(lambda: _bare_read(data_dir))
        watcher_s = best_of(lambda: _catch_up(data_dir))
        w = DataDirWatcher(data_dir, clock=MockClock(0))
        _catch_up_with(w)
        idle_s = best_of(w.poll, repeat=5)
        listing_s = best_of(lambda: _bare_listing(data_dir), repeat=5)
    return {
        "view_catch_up_records_per_s": figure(N_RECORDS / watcher_s, "records/s", N_RECORDS / bare_s,
                                              "framing walk + decode_columns", target="ratio >= 0.25"),
        "view_idle_poll_ms": figure(idle_s * 1000, "ms", listing_s * 1000, "list + stat the segments",
                                    target="<= 25 ms", higher_is_better=False),
    }


def _catch_up_with(w: DataDirWatcher) -> None:
    snap = w.poll()
    while snap["behind"]:
        snap = w.poll()


if __name__ == "__main__":
    for k, v in run().items():
        print(k, v)
