"""``Broker.tick()`` runs the transaction coordinator's periodic tasks that are due on the
injected clock (Kafka's scheduler: abort transactions past ``transaction.timeout.ms``,
checked every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``, 10 s)."""

from __future__ import annotations

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.records import record_batch as rb

T0 = 1_700_000_000_000


def test_tick_aborts_a_transaction_open_past_its_timeout(tmp_path):
    clock = MockClock(T0)
    with Broker(tmp_path / "d", clock=clock) as b:
        b.create_topic("t", 1)
        pid, epoch = b.init_transactional_producer_id("tx", 5_000)
        b.add_partitions_to_txn("tx", pid, epoch, [("t", 0)])
        b.produce("t", 0, rb.encode_batch(0, [(0, T0, b"k", b"v", ())], producer_id=pid, producer_epoch=epoch,
                                          base_sequence=0, attributes=rb.ATTR_TRANSACTIONAL))
        clock.advance(6_000)                    # past the timeout, before the 10 s check
        b.tick()
        assert [d.state for d in b.describe_transactions(["tx"])] == ["Ongoing"]
        assert b.last_stable_offset("t", 0) == 0
        clock.advance(4_000)                    # the check is due: aborted, the marker written
        b.tick()
        assert [d.state for d in b.describe_transactions(["tx"])] == ["CompleteAbort"]
        assert b.last_stable_offset("t", 0) == 2 == b.list_offsets("t", 0, -1)[0]
