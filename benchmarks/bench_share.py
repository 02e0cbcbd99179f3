"""Share groups (KIP-932): 4 in-process share consumers against a consumer group, same data.

Figure (records per second, higher is better):

- ``share_consume_records_per_s``: 4 ``ShareConsumer``s of one share group (explicit
  acknowledgement: ``acknowledge(record, ACCEPT)`` for every record, sent with the next
  ShareFetch, the last ones by ``commit_sync``) read a 4-partition topic of
  :data:`RECORDS` records (100-byte values, 16-byte keys, batches of 100) from the broker's
  ``share_fetch``, polled in turn from one thread, until every record was returned once.

Baseline, same run, same data: 4 ``Consumer``s of one consumer group (classic protocol,
``range``: one partition each) polling in turn and committing after each poll, until every
record was returned. Both groups join and settle before the records are written (a share
group starts at the log end, ``share.auto.offset.reset=latest``), on a MockClock; the time is
the wall time of the polls (and acknowledgements or commits). Best of 3, the two sides
alternating which goes first.

What the ratio says: a share group pays for acquiring and acknowledging every record (the
share-partition's in-flight state, the ShareSnapshot written to ``__share_group_state``
before each answer) where a consumer group advances one position per partition.

Figure (2026-11-28, two runs, 2 shared cores): 292k and 303k records/s against the consumer
group's 932k and 1,156k, ratio 0.31 and 0.26 (0.08 before: 83k against 1,063k). What changed: the share-partition keeps
in-flight *batches* (per-offset state only once a batch is split, as Kafka's
``SharePartition``), so acquiring, acknowledging, moving the SPSO and encoding the ShareSnapshot
cost per batch, not per record; the client decodes acquired batches column-wise through the C
codec (as ``Consumer`` does); ``acknowledge()`` of a record ``poll()`` returned skips the
argument checks. Where the time goes now (cProfile, 20,000 records): the application's
per-record ``acknowledge()`` 40%, ShareFetch's log read and acquisition 25%, decoding 12%,
the ShareSnapshot writes 8%.

``python -m benchmarks share`` runs just this file.
"""

from __future__ import annotations

import time

from benchmarks.common import figure, scratch_dir
from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.consumer import Consumer
from kafkasim.consumer.share_consumer import AcknowledgeType, ShareConsumer

__all__ = ["run", "RECORDS"]

RECORDS, PARTITIONS, CONSUMERS, BATCH = 40_000, 4, 4, 100


def _settle(consumers, clock: MockClock, seconds: int) -> None:
    for _ in range(seconds * 10):
        clock.advance(100)
        for c in consumers:
            c.poll(0)


def _write(b: Broker, clock: MockClock, topic: str) -> None:
    per = RECORDS // PARTITIONS
    value = b"v" * 100
    for p in range(PARTITIONS):
        for first in range(0, per, BATCH):
            b.append_records(topic, p, [(clock.now_ms(), b"key-%012d" % (first + i), value, ())
                                        for i in range(BATCH)])


def _share(b: Broker, clock: MockClock) -> float:
    b.create_topic("share-t", PARTITIONS)
    cs = [ShareConsumer(b, group_id="share-g", client_id=f"s{i}", clock=clock, seed=f"bench:{i}",
                        share_acknowledgement_mode="explicit", max_poll_records=500) for i in range(CONSUMERS)]
    for c in cs:
        c.subscribe(["share-t"])
    _settle(cs, clock, 6)              # every member reconciled (heartbeat interval 5 s)
    _write(b, clock, "share-t")
    got, idle = 0, 0
    t0 = time.perf_counter()
    while got < RECORDS:
        before = got
        for c in cs:
            records = c.poll(0)
            for r in records:
                c.acknowledge(r, AcknowledgeType.ACCEPT)
            got += len(records)
        idle = idle + 1 if got == before else 0
        if idle > 100:
            raise RuntimeError(f"share consumers stalled at {got} of {RECORDS} records")
    for c in cs:
        c.commit_sync()
    elapsed = time.perf_counter() - t0
    lag = sum(v["lag"] for v in b.describe_share_group_offsets("share-g").values())
    for c in cs:
        c.close()
    if got != RECORDS or lag != 0:
        raise RuntimeError(f"share group: {got} of {RECORDS} records returned, lag {lag} after acknowledging")
    return RECORDS / elapsed


def _group(b: Broker, clock: MockClock) -> float:
    b.create_topic("group-t", PARTITIONS)
    cs = [Consumer(b, group_id="group-g", client_id=f"c{i}", clock=clock, auto_offset_reset="earliest",
                   enable_auto_commit=False, max_poll_records=500) for i in range(CONSUMERS)]
    for c in cs:
        c.subscribe(["group-t"])
    _settle(cs, clock, 6)
    if sorted(len(c.assignment()) for c in cs) != [1] * CONSUMERS:
        raise RuntimeError(f"consumer group not settled: {[sorted(c.assignment()) for c in cs]}")
    _write(b, clock, "group-t")
    got, idle = 0, 0
    t0 = time.perf_counter()
    while got < RECORDS:
        before = got
        for c in cs:
            n = sum(len(recs) for recs in c.poll(0).values())
            if n:
                c.commit()
            got += n
        idle = idle + 1 if got == before else 0
        if idle > 100:
            raise RuntimeError(f"consumer group stalled at {got} of {RECORDS} records")
    elapsed = time.perf_counter() - t0
    for c in cs:
        c.close()
    if got != RECORDS:
        raise RuntimeError(f"consumer group: {got} of {RECORDS} records returned")
    return RECORDS / elapsed


def run() -> dict:
    share, group = 0.0, 0.0
    for i in range(3):
        with scratch_dir() as d:
            clock = MockClock(1_700_000_000_000)
            with Broker(d, clock=clock) as b:
                if i % 2:
                    group = max(group, _group(b, clock))
                    share = max(share, _share(b, clock))
                else:
                    share = max(share, _share(b, clock))
                    group = max(group, _group(b, clock))
    return {"share_consume_records_per_s": figure(
        share, "records/s", group, f"a consumer group of {CONSUMERS} Consumers, same {RECORDS:,} records "
        f"on {PARTITIONS} partitions, same run")}
