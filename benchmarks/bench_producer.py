"""Producer benchmarks: send() throughput against a flushed log, and partition_many.

Figures (each with a baseline measured in the same run, runs interleaved, best of N):

- ``send_records_per_s`` — ``Producer.send`` of 100-byte values with keys from 10,000
  merchant ids (Kafka defaults: linger 5 ms, batch 16 KiB, acks=all, idempotent), then
  ``flush()`` and ``Broker.flush()`` (fsync), i.e. against a flushed on-disk log. Baseline:
  mockafka-py's in-memory ``FakeProducer.produce`` of the same records (it does not
  partition, so it is given the partition). Target ratio >= 1.0 (and >= 300k records/s).
- ``send_batched_records_per_s`` — the same records with ``batch_size=262144`` and
  ``linger_ms=50`` (fewer, bigger batches). Same baseline.
- ``txn_produce_records_per_s`` — the same records sent by a transactional producer
  (``transactional_id``), in transactions of 1,000 records (``begin_transaction``, 1,000
  ``send``, ``commit_transaction``: a flush, EndTxn and a COMMIT marker on every partition
  it wrote), then ``Broker.flush()``. Baseline: the same producer without transactions
  (idempotent, the same records, the same flush), in the same run. Target ratio >= 0.5.
- ``partition_many_keys_per_s`` — ``partition_many`` (murmur2) over 1,000,000 16-byte keys.
  Baseline: ``mmh3.hash`` over the same keys (a C hash, one call per key). Target >= 5M keys/s.

Run: ``python -m benchmarks producer``. Takes well under two minutes.
"""

from __future__ import annotations

import time

import mmh3

from benchmarks.common import figure, scratch_dir

__all__ = ["run"]

N_RECORDS = 50_000
N_KEYS = 1_000_000
PARTITIONS = 8
REPEAT = 7
TXN_RECORDS = 1_000          # records per transaction (issue 23's figure)


def _records():
    keys = [b"merchant_%06d" % (i % 10_000) for i in range(N_RECORDS)]
    return keys, b"x" * 100


def _ours(broker, topic, keys, value, **config):
    from kafkasim.producer import Producer

    def go():
        p = Producer(broker, **config)
        send = p.send
        for k in keys:
            send(topic, value, k)
        p.flush()
        broker.flush()
        p.close()
    return go


def _transactional(broker, topic, keys, value, per_txn: int = TXN_RECORDS):
    from kafkasim.producer import Producer
    runs = iter(range(1_000_000))

    def go():
        p = Producer(broker, transactional_id=f"bench-txn-{next(runs)}")
        p.init_transactions()
        send = p.send
        for start in range(0, len(keys), per_txn):
            p.begin_transaction()
            for k in keys[start:start + per_txn]:
                send(topic, value, k)
            p.commit_transaction()
        broker.flush()
        p.close()
    return go


def _mockafka(keys, value):
    try:
        from mockafka import FakeProducer
        from mockafka.admin_client import FakeAdminClientImpl, NewTopic
    except ImportError:     # bench extra not installed
        return None
    FakeAdminClientImpl().create_topics([NewTopic(topic="bench-mock", num_partitions=PARTITIONS)])

    def go():
        mp = FakeProducer()
        produce = mp.produce
        for i, k in enumerate(keys):
            produce("bench-mock", value, k, partition=i % PARTITIONS)
    return go


def _timed(cases: dict, repeat: int = REPEAT) -> dict:
    best = {name: float("inf") for name in cases}
    for _ in range(repeat):               # interleaved, so load changes hit every case alike
        for name, fn in cases.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def run() -> dict:
    from kafkasim.broker import Broker
    from kafkasim.partitioning.partitioners import partition_many

    out = {}
    keys, value = _records()
    with scratch_dir() as d:
        broker = Broker(d)
        broker.create_topic("bench", partitions=PARTITIONS)
        cases = {"ours": _ours(broker, "bench", keys, value),
                 "batched": _ours(broker, "bench", keys, value, batch_size=262_144, linger_ms=50)}
        cases["transactional"] = _transactional(broker, "bench", keys, value)
        mock = _mockafka(keys, value)
        if mock is not None:
            cases["mockafka"] = mock
        t = _timed(cases)
        broker.close()
    base = N_RECORDS / t["mockafka"] if "mockafka" in t else None
    out["send_records_per_s"] = figure(
        N_RECORDS / t["ours"], "records/s", base, "mockafka-py FakeProducer.produce (in memory)",
        target=">= 300k records/s; ratio >= 1.0")
    out["send_batched_records_per_s"] = figure(
        N_RECORDS / t["batched"], "records/s", base, "mockafka-py FakeProducer.produce (in memory)")

    out["txn_produce_records_per_s"] = figure(
        N_RECORDS / t["transactional"], "records/s", N_RECORDS / t["ours"],
        "the same producer without transactions (idempotent), same run",
        target="ratio >= 0.5")

    pkeys = [b"merchant_%07d" % i for i in range(N_KEYS)]          # 16 bytes each
    assert len(pkeys[0]) == 16
    t = _timed({"partition_many": lambda: partition_many(pkeys, 64),
                "mmh3": lambda: list(map(mmh3.hash, pkeys))})
    out["partition_many_keys_per_s"] = figure(
        N_KEYS / t["partition_many"], "keys/s", N_KEYS / t["mmh3"], "mmh3.hash per key (C)",
        target=">= 5M keys/s")
    return out
