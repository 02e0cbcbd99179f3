"""The transactional producer (producer/transactions.py) end to end on an in-process broker:
commit, abort, kafka-python's state errors, fencing, offsets in a transaction, and a
consume-transform-produce loop with exact results."""

from __future__ import annotations

import pytest

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.consumer import Consumer
from kafkasim.errors import IllegalStateError, InvalidConfigurationError, ProducerFencedError
from kafkasim.producer import Producer
from kafkasim.records import record_batch as rb
from kafkasim.types import OffsetAndMetadata, TopicPartition

T0 = 1_700_000_000_000
TP0 = TopicPartition("t", 0)


@pytest.fixture
def b(tmp_path):
    with Broker(tmp_path / "d", clock=MockClock(T0)) as broker:
        broker.create_topic("t", 2)
        yield broker


def committed_values(b, topic="t", partition=0):
    c = Consumer(b, isolation_level="read_committed", auto_offset_reset="earliest")
    c.assign([TopicPartition(topic, partition)])
    return [r.value for recs in c.poll(max_records=10_000).values() for r in recs]


def test_a_committed_transaction_writes_transactional_batches_and_a_commit_marker(b):
    p = Producer(b, transactional_id="tx")
    assert p.idempotent
    p.init_transactions()
    p.begin_transaction()
    f = p.send("t", b"a", partition=0)
    p.send("t", b"b", partition=0)
    p.commit_transaction()
    assert f.get().offset == 0
    batches = b.fetch_batches("t", 0, 0, isolation_level=1).batches
    assert [bool(h.attributes & rb.ATTR_TRANSACTIONAL) for h, _ in batches] == [True, True]
    assert batches[-1][0].attributes & rb.ATTR_CONTROL           # the COMMIT marker
    assert committed_values(b) == [b"a", b"b"]
    assert [d.state for d in b.describe_transactions(["tx"])] == ["CompleteCommit"]


def test_an_aborted_transaction_is_invisible_to_read_committed(b):
    p = Producer(b, transactional_id="tx")
    p.init_transactions()
    p.begin_transaction()
    p.send("t", b"gone", partition=0)
    p.abort_transaction()
    p.begin_transaction()
    p.send("t", b"kept", partition=0)
    p.commit_transaction()
    assert committed_values(b) == [b"kept"]


def test_an_open_transaction_holds_read_committed_back(b):
    p = Producer(b, transactional_id="tx")
    p.init_transactions()
    p.begin_transaction()
    p.send("t", b"pending", partition=0)
    p.flush()
    assert committed_values(b) == []
    p.commit_transaction()
    assert committed_values(b) == [b"pending"]


def test_kafka_python_state_errors(b):
    plain = Producer(b)
    with pytest.raises(IllegalStateError, match="transactional_id"):
        plain.init_transactions()
    with pytest.raises(IllegalStateError):
        plain.begin_transaction()
    p = Producer(b, transactional_id="tx")
    with pytest.raises(IllegalStateError, match="init_transactions"):
        p.send("t", b"x")
    with pytest.raises(IllegalStateError, match="Invalid transition"):
        p.begin_transaction()                    # before init_transactions
    p.init_transactions()
    with pytest.raises(IllegalStateError, match="Cannot call send in state READY"):
        p.send("t", b"x")
    with pytest.raises(IllegalStateError, match="not in an active transaction"):
        p.send_offsets_to_transaction({TP0: OffsetAndMetadata(1, "")}, "g")
    p.begin_transaction()
    with pytest.raises(IllegalStateError, match="IN_TRANSACTION to state IN_TRANSACTION"):
        p.begin_transaction()
    p.commit_transaction()                       # nothing added: no EndTxn, back to READY
    with pytest.raises(IllegalStateError):
        p.commit_transaction()


def test_transactional_id_forces_idempotence_and_refuses_it_off(b):
    with pytest.raises(InvalidConfigurationError, match="Cannot set transactional_id without enable_idempotence"):
        Producer(b, transactional_id="tx", enable_idempotence=False)
    with pytest.raises(InvalidConfigurationError, match="acks"):
        Producer(b, transactional_id="tx", acks=1)


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(b):
    p1 = Producer(b, transactional_id="tx")
    p1.init_transactions()
    p1.begin_transaction()
    p1.send("t", b"zombie", partition=0)
    p1.flush()
    p2 = Producer(b, transactional_id="tx")
    p2.init_transactions()                       # aborts p1's open transaction, bumps the epoch
    with pytest.raises(ProducerFencedError):
        p1.commit_transaction()
    with pytest.raises(ProducerFencedError):     # fatal: every later call fails too
        p1.begin_transaction()
    p2.begin_transaction()
    p2.send("t", b"live", partition=0)
    p2.commit_transaction()
    assert committed_values(b) == [b"live"]


def test_send_offsets_to_transaction_commits_only_with_the_transaction(b):
    p = Producer(b, transactional_id="tx")
    p.init_transactions()
    p.begin_transaction()
    p.send_offsets_to_transaction({TP0: OffsetAndMetadata(5, "")}, "g")
    p.abort_transaction()
    assert b.offset_fetch("g") == {}
    p.begin_transaction()
    c = Consumer(b, group_id="g")
    p.send_offsets_to_transaction({TP0: OffsetAndMetadata(7, "")}, c.group_metadata())
    assert b.offset_fetch("g") == {}                            # not before the commit
    p.commit_transaction()
    assert b.offset_fetch("g")[TP0].offset == 7


def test_consume_transform_produce_gives_exact_totals_across_a_crash(b):
    """Read ``payments`` (key → amount), write running totals to ``totals`` and the consumed
    offsets in one transaction each poll. A worker crashes after sending but before
    committing; its replacement (same transactional id) starts from the committed offsets,
    and read_committed sees every input counted exactly once."""
    b.create_topic("payments", 1)
    b.create_topic("totals", 1)
    feed = Producer(b)
    amounts = [(b"k%d" % (i % 3), i) for i in range(30)]
    for k, v in amounts:
        feed.send("payments", str(v).encode(), key=k)
    feed.flush()

    def worker(polls, crash_after=None):
        c = Consumer(b, "payments", group_id="job", enable_auto_commit=False, auto_offset_reset="earliest",
                     isolation_level="read_committed", max_poll_records=7)
        p = Producer(b, transactional_id="job-0")
        p.init_transactions()
        transactions = 0
        for _ in range(polls):
            got = c.poll(timeout_ms=1000)
            recs = [r for rs in got.values() for r in rs]
            if not recs:
                continue                      # joining the group, or nothing left
            p.begin_transaction()
            for r in recs:
                p.send("totals", r.value, key=r.key)
            p.send_offsets_to_transaction({TopicPartition("payments", 0): OffsetAndMetadata(recs[-1].offset + 1, "")},
                                          c.group_metadata())
            transactions += 1
            if transactions == crash_after:
                p.flush()                     # the records were written, the transaction not committed
                c.close()                     # its group membership ends (no offsets committed)
                return
            p.commit_transaction()
        c.close()

    worker(20, crash_after=2)
    worker(20)
    out = committed_values(b, "totals")
    assert sorted(int(v) for v in out) == list(range(30))      # each input exactly once
    assert b.offset_fetch("job")[TopicPartition("payments", 0)].offset == 30
    c = Consumer(b, isolation_level="read_uncommitted", auto_offset_reset="earliest")
    c.assign([TopicPartition("totals", 0)])
    dirty = [r.value for rs in c.poll(max_records=10_000).values() for r in rs]
    assert len(dirty) > 30                        # the crashed worker's aborted writes are there
