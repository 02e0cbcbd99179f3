"""The transaction coordinator's periodic tasks run in the broker's tick, with Kafka's broker
config names, and a broker that restarts with a transaction left prepared completes it on its
own (it does not wait for a transactional client to touch the coordinator)."""

from __future__ import annotations

import pytest

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.errors import InvalidConfigurationError, InvalidTransactionTimeoutError, ProducerFencedError
from kafkasim.records import record_batch as rb
from kafkasim.records.control import read_control_batch

T0 = 1_700_000_000_000


def _batch(pid, epoch, seq, n=2):
    return rb.encode_batch(0, [(i, T0 + i, None, b"v%d" % (seq + i), ()) for i in range(n)],
                           producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                           attributes=rb.ATTR_TRANSACTIONAL)


def _markers(b, topic, partition):
    """``[(COMMIT|ABORT, producer id)]`` of every control batch of the partition."""
    out = []
    for h, raw in b.fetch_batches(topic, partition, 0, isolation_level=0).batches:
        if h.attributes & rb.ATTR_CONTROL:
            out.append(("COMMIT" if read_control_batch(raw, 0, h)[0].is_commit else "ABORT", h.producer_id))
    return out


def test_broker_tick_aborts_a_timed_out_transaction_at_the_configured_check_interval(tmp_path):
    clock = MockClock(T0)
    configs = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": 500}
    with Broker(tmp_path / "d", clock=clock, broker_configs=configs) as b:
        b.create_topic("t", 1)
        pid, epoch = b.init_transactional_producer_id("tx", 2_000)
        b.add_partitions_to_txn("tx", pid, epoch, [("t", 0)])
        b.produce("t", 0, _batch(pid, epoch, 0))
        clock.advance(1_999)                       # a check runs (due since T0 + 500): not timed out yet
        b.tick()
        clock.advance(2)                           # past the timeout, but the next check is at T0 + 2499
        b.tick()
        assert [d.state for d in b.describe_transactions(["tx"])] == ["Ongoing"]
        clock.advance(498)                         # T0 + 2499: that check aborts it
        b.tick()
        assert [d.state for d in b.describe_transactions(["tx"])] == ["CompleteAbort"]
        assert _markers(b, "t", 0) == [("ABORT", pid)]
        r = b.fetch_batches("t", 0, 0, isolation_level=1)
        assert r.last_stable_offset == r.high_watermark == 3
        with pytest.raises(ProducerFencedError):
            b.end_txn("tx", pid, epoch, commit=True)


def test_the_default_check_interval_is_kafkas_ten_seconds(tmp_path):
    clock = MockClock(T0)
    with Broker(tmp_path / "d", clock=clock) as b:
        b.create_topic("t", 1)
        pid, epoch = b.init_transactional_producer_id("tx", 1_000)
        b.add_partitions_to_txn("tx", pid, epoch, [("t", 0)])
        clock.advance(9_999)
        b.tick()
        assert [d.state for d in b.describe_transactions(["tx"])] == ["Ongoing"]
        clock.advance(1)
        b.tick()
        assert [d.state for d in b.describe_transactions(["tx"])] == ["CompleteAbort"]


def test_transaction_max_timeout_ms_bounds_what_a_producer_may_ask_for(tmp_path):
    with Broker(tmp_path / "d", clock=MockClock(T0), broker_configs={"transaction.max.timeout.ms": 5_000}) as b:
        with pytest.raises(InvalidTransactionTimeoutError, match="5000"):
            b.init_transactional_producer_id("tx", 5_001)
        assert b.init_transactional_producer_id("tx", 5_000)[1] == 0
    with pytest.raises(InvalidConfigurationError, match="transaction.max.timeout.ms"):
        Broker(tmp_path / "e", broker_configs={"transaction.max.timeout.ms": 0})


def test_transactional_id_expiration_runs_in_the_broker_tick(tmp_path):
    clock = MockClock(T0)
    configs = {"transactional.id.expiration.ms": 1_000,
               "transaction.remove.expired.transaction.cleanup.interval.ms": 1_000}
    with Broker(tmp_path / "d", clock=clock, broker_configs=configs) as b:
        b.init_transactional_producer_id("idle", 60_000)
        clock.advance(999)
        b.tick()
        assert [d.state for d in b.describe_transactions(["idle"])] == ["Empty"]
        clock.advance(1)                           # idle for transactional.id.expiration.ms: removed
        b.tick()
        assert b.describe_transactions(["idle"])[0].error_code != 0                # removed


class _Crash(Exception):
    pass


def test_a_restarted_broker_completes_a_prepared_commit_in_its_first_tick(tmp_path):
    """The broker stops between PrepareCommit and the markers (the crash hook raises there);
    reopened, its first tick loads the coordinator, which writes every COMMIT marker."""
    clock = MockClock(T0)
    d = tmp_path / "d"
    with Broker(d, clock=clock) as b:
        b.create_topic("t", 3)
        pid, epoch = b.init_transactional_producer_id("tx", 60_000)
        b.add_partitions_to_txn("tx", pid, epoch, [("t", p) for p in range(3)])
        for p in range(3):
            b.produce("t", p, _batch(pid, epoch, 0))

        def crash(point):
            if point == "txn.after_first_commit_marker":
                raise _Crash(point)

        b.crash_hook = crash
        with pytest.raises(_Crash):
            b.end_txn("tx", pid, epoch, commit=True)
        assert [_markers(b, "t", p) for p in range(3)] == [[("COMMIT", pid)], [], []]
    with Broker(d, clock=clock) as b:
        assert b.fetch_batches("t", 1, 0, isolation_level=1).last_stable_offset == 0   # still held back
        b.tick()
        assert [_markers(b, "t", p)[-1:] for p in range(3)] == [[("COMMIT", pid)]] * 3
        for p in range(3):
            r = b.fetch_batches("t", p, 0, isolation_level=1)
            assert r.last_stable_offset == r.high_watermark and r.aborted_transactions == []
        assert [x.state for x in b.describe_transactions(["tx"])] == ["CompleteCommit"]
