"""The broker's producer state (broker/producers_api.py): DescribeProducers' rows as Kafka's
``ProducerStateManager`` gives them, and a WriteTxnMarkers marker checked as Kafka's
partition leader checks it; on a cluster, any replica describes its own producers."""

from __future__ import annotations

import pytest

from kafkasim.broker import Broker
from kafkasim.broker.cluster import Cluster
from kafkasim.broker.producer_state import ProducerState
from kafkasim.clock import MockClock
from kafkasim.errors import (
    InvalidProducerEpochError, NotLeaderOrFollowerError, TransactionCoordinatorFencedError,
    UnknownTopicOrPartitionError,
)
from kafkasim.records import record_batch as rb

T0 = 1_700_000_000_000


def batch(pid, epoch, seq, n=2, transactional=True, ts=T0):
    return rb.encode_batch(0, [(i, ts + i, None, b"v", ()) for i in range(n)], producer_id=pid,
                           producer_epoch=epoch, base_sequence=seq,
                           attributes=rb.ATTR_TRANSACTIONAL if transactional else 0)


@pytest.fixture
def b(tmp_path):
    with Broker(tmp_path / "d", clock=MockClock(T0 + 60_000)) as broker:
        broker.create_topic("t", 2)
        yield broker


def test_rows_follow_each_producers_batches_and_markers(b):
    pid, epoch = b.init_transactional_producer_id("tx")
    b.add_partitions_to_txn("tx", pid, epoch, [("t", 0)])
    b.produce("t", 0, batch(pid, epoch, 0, 3))                       # offsets 0-2, open
    ipid, iepoch = b.init_producer_id()
    b.produce("t", 0, batch(ipid, iepoch, 0, 2, transactional=False, ts=T0 + 10))   # idempotent, 3-4
    b.produce("t", 0, rb.encode_batch(0, [(0, T0, None, b"plain", ())]))            # no producer id: not listed
    assert b.describe_producers("t", 0) == [
        ProducerState(pid, epoch, 2, T0 + 2, -1, 0),
        ProducerState(ipid, iepoch, 1, T0 + 11, -1, -1)]
    b.end_txn("tx", pid, epoch, commit=True)                         # the marker: coordinator epoch, its time
    (tx,) = [s for s in b.describe_producers("t", 0) if s.producer_id == pid]
    assert tx == ProducerState(pid, epoch, 2, T0 + 60_000, 0, -1)
    assert b.describe_producers("t", 1) == []


def test_a_marker_is_checked_as_kafkas_leader_checks_it(b):
    b.log("t", 0).append_batch(batch(77, 4, 0), in_transaction=True)   # a transaction no coordinator knows
    with pytest.raises(InvalidProducerEpochError, match="smaller than the last seen epoch 4"):
        b.write_txn_marker("t", 0, 77, 3, 0)
    b.write_txn_marker("t", 0, 77, 4, 2)                               # ABORT, coordinator epoch 2
    assert b.describe_producers("t", 0) == [ProducerState(77, 4, 1, T0 + 60_000, 2, -1)]
    assert [(a.producer_id, a.first_offset, a.last_offset) for a in b.log("t", 0).collect_aborted_txns(0, 9)] == \
        [(77, 0, 2)]
    with pytest.raises(TransactionCoordinatorFencedError, match=r"1 \(zombie\), 2 \(current\)"):
        b.write_txn_marker("t", 0, 77, 4, 1)
    with pytest.raises(UnknownTopicOrPartitionError):
        b.write_txn_marker("t", 5, 77, 4, 2)
    with pytest.raises(UnknownTopicOrPartitionError):
        b.describe_producers("nosuch", 0)


def test_on_a_cluster_each_replica_describes_its_own_producers(tmp_path):
    clock = MockClock(T0)
    with Cluster(tmp_path / "c", [(0, "r1"), (1, "r2"), (2, "r3")], clock=clock) as c:
        c.create_topic("t", 1, 2)
        replicas = c.describe_topic("t")["partitions"][0]["replicas"]
        leader = c.leader_for("t", 0)
        follower = next(r for r in replicas if r != leader)
        outsider = next(r for r in (0, 1, 2) if r not in replicas)
        pid, epoch = c.init_producer_id()
        c.produce("t", 0, batch(pid, epoch, 0, 2, transactional=False), acks="all")   # the follower has it too
        want = [ProducerState(pid, epoch, 1, T0 + 1, -1, -1)]
        assert c.describe_producers("t", 0) == want == c.describe_producers("t", 0, node=follower)
        with pytest.raises(NotLeaderOrFollowerError, match=f"broker {outsider} hosts no replica of t-0"):
            c.describe_producers("t", 0, node=outsider)
