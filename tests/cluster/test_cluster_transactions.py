"""Transactions on a 3-broker cluster whose partitions lose their leader: a commit whose
markers cannot all be written (a partition offline: its only replica's broker stopped) is
answered, as Kafka's EndTxn is once PrepareCommit is written; the markers that can be written
are, the others wait, retried by the cluster's tick until the partition has a leader again,
and only then does the transaction complete (meanwhile the id answers
CONCURRENT_TRANSACTIONS). Randomised schedules with broker stops: tests/broker/test_txn_randomised.py."""

from __future__ import annotations

import pytest

from kafkasim.broker.cluster import Cluster
from kafkasim.consumer import Consumer
from kafkasim.errors import ConcurrentTransactionsError
from kafkasim.records import record_batch as rb
from kafkasim.records.control import read_control_batch
from kafkasim.types import TopicPartition

RACKS3 = [(0, "r1"), (1, "r2"), (2, "r3")]


def _txn_batch(clock, pid, epoch, value: bytes) -> bytes:
    return rb.encode_batch(0, [(0, clock.now_ms(), None, value, ())], producer_id=pid, producer_epoch=epoch,
                           base_sequence=0, attributes=rb.ATTR_TRANSACTIONAL)


def _markers(c, p):
    out = []
    for h, raw in c.fetch_batches("t", p, 0, isolation_level=0).batches:
        if h.attributes & rb.ATTR_CONTROL:
            out.append("COMMIT" if read_control_batch(raw, 0, h)[0].is_commit else "ABORT")
    return out


def _read_committed(c, partitions):
    consumer = Consumer(c, isolation_level="read_committed", auto_offset_reset="earliest", enable_auto_commit=False)
    consumer.assign([TopicPartition("t", p) for p in partitions])
    got = {p: [] for p in partitions}
    for tp, records in consumer.poll(max_records=1000).items():
        got[tp.partition] += [r.value for r in records]
    consumer.close()
    return got


@pytest.fixture
def c(tmp_path, clock):
    cluster = Cluster(tmp_path / "data", RACKS3, clock=clock, seed=3,
                      broker_configs={"transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000})
    yield cluster
    cluster.close()


def test_a_commit_with_an_offline_partition_completes_once_its_leader_is_back(c, clock):
    c.create_topic("t", 3, 1)                                   # one replica each: a stopped broker takes it offline
    pid, epoch = c.init_transactional_producer_id("tx", 60_000)
    c.add_partitions_to_txn("tx", pid, epoch, [("t", p) for p in range(3)])
    for p in range(3):
        c.produce("t", p, _txn_batch(clock, pid, epoch, b"v%d" % p))
    c.add_offsets_to_txn("tx", pid, epoch, "g")
    c.txn_offset_commit("tx", "g", pid, epoch, {TopicPartition("t", 0): 4})
    down = c._partition("t", 1).leader
    c.stop_broker(down)

    c.end_txn("tx", pid, epoch, commit=True)                    # answered: PrepareCommit is written
    assert [d.state for d in c.describe_transactions(["tx"])] == ["PrepareCommit"]
    assert [_markers(c, p) for p in (0, 2)] == [["COMMIT"], ["COMMIT"]]
    assert _read_committed(c, [0, 2]) == {0: [b"v0"], 2: [b"v2"]}
    assert c.offset_fetch("g")[TopicPartition("t", 0)].offset == 4   # its __consumer_offsets marker is written
    with pytest.raises(ConcurrentTransactionsError):
        c.init_transactional_producer_id("tx", 60_000)          # markers still in flight
    clock.advance(5_000)
    c.tick()                                                    # still offline: still pending
    assert [d.state for d in c.describe_transactions(["tx"])] == ["PrepareCommit"]

    c.start_broker(down)
    c.tick()                                                    # the retry writes the last marker
    assert [d.state for d in c.describe_transactions(["tx"])] == ["CompleteCommit"]
    assert [_markers(c, p) for p in range(3)] == [["COMMIT"]] * 3
    assert _read_committed(c, [0, 1, 2]) == {0: [b"v0"], 1: [b"v1"], 2: [b"v2"]}
    assert c.init_transactional_producer_id("tx", 60_000) == (pid, epoch + 1)


def test_a_cluster_reopened_with_a_prepared_commit_and_a_partition_offline_completes_later(tmp_path, clock):
    d = tmp_path / "data"
    with Cluster(d, RACKS3, clock=clock, seed=3) as c:
        c.create_topic("t", 2, 1)
        pid, epoch = c.init_transactional_producer_id("tx", 60_000)
        c.add_partitions_to_txn("tx", pid, epoch, [("t", 0), ("t", 1)])
        for p in range(2):
            c.produce("t", p, _txn_batch(clock, pid, epoch, b"v%d" % p))
        down = c._partition("t", 1).leader
        c.stop_broker(down)
        c.end_txn("tx", pid, epoch, commit=True)
        assert [d.state for d in c.describe_transactions(["tx"])] == ["PrepareCommit"]
    with Cluster(d, clock=clock) as c:                          # broker `down` is still stopped
        c.tick()                                                # loads the coordinator: t-1 still pending
        assert [d.state for d in c.describe_transactions(["tx"])] == ["PrepareCommit"]
        c.start_broker(down)
        c.tick()
        assert [d.state for d in c.describe_transactions(["tx"])] == ["CompleteCommit"]
        assert _read_committed(c, [0, 1]) == {0: [b"v0"], 1: [b"v1"]}


def test_markers_reach_the_isr_before_the_commit_answers_so_a_leader_change_keeps_them(c, clock):
    """A marker is written as acks=all: the leader stopping right after EndTxn (no tick, no
    produce between) leaves the new leader with the marker, not with a transaction open
    forever (found by the randomised cluster schedules, seed 720)."""
    c.create_topic("t", 1, 3)
    pid, epoch = c.init_transactional_producer_id("tx", 60_000)
    c.add_partitions_to_txn("tx", pid, epoch, [("t", 0)])
    c.produce("t", 0, _txn_batch(clock, pid, epoch, b"v"), acks="all")
    c.end_txn("tx", pid, epoch, commit=True)
    old = c._partition("t", 0).leader
    c.stop_broker(old)
    assert c._partition("t", 0).leader not in (-1, old)
    assert _markers(c, 0) == ["COMMIT"]
    r = c.fetch_batches("t", 0, 0, isolation_level=1)
    assert r.last_stable_offset == r.high_watermark == 2
    assert _read_committed(c, [0]) == {0: [b"v"]}
