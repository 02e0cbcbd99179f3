"""Storage benchmarks: append and read throughput of a Log, and reopening a 1 GB log.

Figures (``python -m benchmarks storage``):

- ``append_records_per_s``: ``Log.append_batch`` of 1M records (100-byte values, 10-byte keys)
  in batches of 1,000, already encoded as Kafka v2 — what a produce does with the bytes a
  client sent (header and CRC-32C checked, every record walked as Kafka's ``LogValidator``
  does, offsets stamped, written, indexed). Baseline, measured in the same run: a bare
  ``file.write`` of the same encoded batches. Target: ratio ≥ 0.5.
- ``append_encode_records_per_s``: ``Log.append`` of the same records as tuples (encoded as
  Kafka v2 by the C codec, then as above). Same baseline; no target.
- ``read_records_per_s``: ``Log.read(offset, 1 MiB)`` from offset 0 to the end of the
  same log, as a consumer polls (CRC check + decode into ``Record``). Target ≥ 1M/s.
- ``reopen_1gb_s``: opening a ~1 GB log (default ``segment.bytes``, 1 GiB, so one
  segment) after a clean close. Target ≤ 0.5 s. ``reopen_1gb_unclean_s`` opens it after a
  kill-like stop with 8 MB appended after the last flush (recovery validates that tail).

Each timing is the best of 3 rounds; append and baseline alternate every 100 batches
so machine noise hits both. The scratch directory is deleted afterwards.
"""

from __future__ import annotations

import gc
import os
import time

from benchmarks.common import figure, scratch_dir
from kafkasim.clock import SystemClock
from kafkasim.config import LogConfig
from kafkasim.records import record_batch as rb
from kafkasim.storage.log import Log

__all__ = ["run"]

N_RECORDS = 1_000_000
BATCH = 1_000
ROUNDS = 3
T0 = 1_700_000_000_000


def _batches() -> list[list[tuple]]:
    value = bytes(range(100))
    return [[(T0 + i + j, b"key-%06d" % ((i + j) % 100_000), value, ()) for j in range(BATCH)]
            for i in range(0, N_RECORDS, BATCH)]


def _append_vs_bare(directory: str, batches, encoded, chunk: int = 100) -> tuple[float, float, float, Log]:
    """Seconds for ``Log.append`` of every batch, ``Log.append_batch`` of every encoded batch
    (into a second log) and a bare ``write`` of the encoded batches.

    The three alternate every ``chunk`` batches, so a burst of load from other processes
    on this shared machine hits each about equally.
    """
    log = Log(os.path.join(directory, "append-0"), LogConfig(), SystemClock())
    log2 = Log(os.path.join(directory, "append-1"), LogConfig(), SystemClock())
    bare_s = append_s = batch_s = 0.0
    with open(os.path.join(directory, "bare.bin"), "wb") as f:
        for i in range(0, len(batches), chunk):
            part, enc = batches[i:i + chunk], encoded[i:i + chunk]
            t = time.perf_counter()
            for b in enc:
                f.write(b)
            t1 = time.perf_counter()
            for b in part:
                log.append(b)
            t2 = time.perf_counter()
            for b in enc:
                log2.append_batch(b)
            t3 = time.perf_counter()
            bare_s += t1 - t
            append_s += t2 - t1
            batch_s += t3 - t2
    os.unlink(os.path.join(directory, "bare.bin"))
    log2.delete()
    return append_s, batch_s, bare_s, log


def _read(log: Log) -> float:
    t = time.perf_counter()
    offset, n, leo = 0, 0, log.log_end_offset
    while offset < leo:
        recs = log.read(offset, 1 << 20)
        n += len(recs)
        offset = recs[-1].offset + 1
    elapsed = time.perf_counter() - t
    assert n == leo, (n, leo)
    return elapsed


def _build_1gb(path: str, target: int = 1 << 30) -> Log:
    """~1 GB of 1 MB batches (1,000 records of 1 KB), appended through append_batch."""
    value = os.urandom(1000)
    batch = rb.encode_batch(0, [(j, T0 + j, b"key-%d" % j, value, ()) for j in range(1000)])
    log = Log(path, LogConfig(), SystemClock())
    while log.size_in_bytes + len(batch) <= target:
        log.append_batch(batch)
    return log


def run() -> dict:
    batches = _batches()
    encoded = [rb.encode_records(0, b) for b in batches]
    out = {}
    with scratch_dir("kafkasim-bench-storage-") as d:
        bare_best = append_best = batch_best = read_best = float("inf")
        for _ in range(ROUNDS):
            gc.collect()
            append_s, batch_s, bare_s, log = _append_vs_bare(d, batches, encoded)
            append_best, bare_best = min(append_best, append_s), min(bare_best, bare_s)
            batch_best = min(batch_best, batch_s)
            gc.collect()
            read_best = min(read_best, _read(log))
            log.delete()
        del batches, encoded
        out["append_records_per_s"] = figure(
            N_RECORDS / batch_best, "records/s", baseline=N_RECORDS / bare_best,
            baseline_name="file.write of the same encoded batches", target="ratio >= 0.5")
        out["append_encode_records_per_s"] = figure(
            N_RECORDS / append_best, "records/s", baseline=N_RECORDS / bare_best,
            baseline_name="file.write of the same batches, encoded")
        out["read_records_per_s"] = figure(N_RECORDS / read_best, "records/s", target=">= 1000000")

        big = os.path.join(d, "big-0")
        log = _build_1gb(big)
        size = log.size_in_bytes
        log.close()
        clean_best = float("inf")
        for _ in range(ROUNDS):
            t = time.perf_counter()
            log = Log(big, LogConfig(), SystemClock())
            clean_best = min(clean_best, time.perf_counter() - t)
            assert log.size_in_bytes == size and not log.recovery_report
            log.close()
        out["reopen_1gb_s"] = figure(clean_best, "s", target="<= 0.5 (clean shutdown, %.2f GB)" % (size / 1e9),
                                     higher_is_better=False)
        log = Log(big, LogConfig(), SystemClock())
        log.flush()
        value = os.urandom(1000)
        for _ in range(8):
            log.append([(T0, b"k", value, ())] * 1000)
        # no close(): like a killed process, the next open has no clean-shutdown marker
        t = time.perf_counter()
        again = Log(big, LogConfig(), SystemClock())
        out["reopen_1gb_unclean_s"] = figure(time.perf_counter() - t, "s",
                                             target="recovery validates only the 8 MB unflushed tail",
                                             higher_is_better=False)
        assert again.log_end_offset == log.log_end_offset
        again.close()
        log.delete()
    return out


if __name__ == "__main__":
    for k, v in run().items():
        print(k, v)
