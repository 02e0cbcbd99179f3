"""Cluster benchmarks: replicated produce and reassignment copy throughput.

Figures (``python -m benchmarks cluster``):

- ``replicated_append_records_per_s``: ``Cluster.produce(acks="all")`` of 300k records
  (100-byte values, 10-byte keys) in pre-encoded batches of 1,000 to a topic with
  replication factor 3 and ``min.insync.replicas=2``: the leader appends and both followers
  copy every batch before the produce returns. Baseline, measured in the same run: the
  one broker's ``Broker.produce(acks=1)`` of the same batches (its ``append_records_per_s``).
  Target: ratio ≥ 0.33 (three copies, so a third of the one-copy rate is the ideal).
- ``reassign_bytes_per_s``: ``Cluster.reassign`` moving every replica of an 8-partition
  topic (RF 1, ~30 MB) to a newly added broker, unthrottled: bytes copied per second of wall
  time. Baseline: ``shutil.copytree`` of the same partition directories.

Each timing is the best of 3 rounds (the one-broker and the cluster rounds alternate so
machine noise hits both); every round uses a fresh scratch directory, deleted afterwards.
"""

from __future__ import annotations

import gc
import os
import shutil
import time

from benchmarks.common import figure, scratch_dir
from kafkasim.broker import Broker
from kafkasim.broker.cluster import Cluster
from kafkasim.clock import MockClock
from kafkasim.records.record_batch import encode_batch

__all__ = ["run"]

N_RECORDS = 300_000
BATCH = 1_000
ROUNDS = 3
T0 = 1_700_000_000_000
RACKS = [(0, "r1"), (1, "r2"), (2, "r3")]


def _batches() -> list[bytes]:
    value = bytes(range(100))
    return [encode_batch(0, [(j, T0 + i + j, b"key-%06d" % ((i + j) % 100_000), value, ()) for j in range(BATCH)])
            for i in range(0, N_RECORDS, BATCH)]


def _produce(target, batches: list[bytes], acks) -> float:
    gc.collect()
    t = time.perf_counter()
    for b in batches:
        target.produce("t", 0, b, acks=acks)
    return time.perf_counter() - t


def _one_broker(d: str, batches: list[bytes]) -> float:
    with Broker(os.path.join(d, "one"), clock=MockClock(T0)) as b:
        b.create_topic("t", 1, 1)
        return _produce(b, batches, 1)


def _replicated(d: str, batches: list[bytes]) -> float:
    with Cluster(os.path.join(d, "three"), RACKS, clock=MockClock(T0)) as c:
        c.create_topic("t", 1, 3, {"min.insync.replicas": "2"})
        s = _produce(c, batches, "all")
        part = c.describe_cluster()["partitions"][0]
        assert part["high_watermark"] == N_RECORDS and set(part["log_end_offsets"].values()) == {N_RECORDS}
        return s


def _reassign(d: str, batches: list[bytes]) -> tuple[float, float, int]:
    path = os.path.join(d, "moving")
    with Cluster(path, [(0, None)], clock=MockClock(T0)) as c:
        c.create_topic("t", 8, 1)
        for i, b in enumerate(batches[:240]):
            c.produce("t", i % 8, b)
        c.flush()
        c.add_broker(1)
        src = os.path.join(path, "broker-0")
        t = time.perf_counter()
        shutil.copytree(src, os.path.join(d, "copied"))
        copy_s = time.perf_counter() - t
        t = time.perf_counter()
        res = c.reassign({tp: [1] for tp in c.assignment()})
        move_s = time.perf_counter() - t
        assert c.verify({tp: [1] for tp in c.assignment()})["complete"]
        return move_s, copy_s, res["bytes_moved"]


def run() -> dict:
    batches = _batches()
    one_best = three_best = move_best = copy_best = float("inf")
    moved = 0
    for _ in range(ROUNDS):
        with scratch_dir() as d:
            one_best = min(one_best, _one_broker(d, batches))
            three_best = min(three_best, _replicated(d, batches))
        with scratch_dir() as d:
            move_s, copy_s, moved = _reassign(d, batches)
            move_best, copy_best = min(move_best, move_s), min(copy_best, copy_s)
    return {
        "replicated_append_records_per_s": figure(
            N_RECORDS / three_best, "records/s", baseline=N_RECORDS / one_best,
            baseline_name="append_records_per_s of one Broker (acks=1), same batches, same run",
            target="ratio >= 0.33"),
        "reassign_bytes_per_s": figure(
            moved / move_best, "bytes/s", baseline=moved / copy_best,
            baseline_name="shutil.copytree of the same partition directories"),
    }
