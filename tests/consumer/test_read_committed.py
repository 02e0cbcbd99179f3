"""isolation_level on the consumer (consumer/fetcher.py, txn facts §4.3): read_committed stops
at the last stable offset and drops aborted transactions; neither level returns markers;
positions move past markers."""

from __future__ import annotations

import pytest

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.consumer import Consumer
from kafkasim.consumer.fetcher import batches_to_columns
from kafkasim.errors import InvalidArgumentError
from kafkasim.producer import Producer
from kafkasim.records import record_batch as rb
from kafkasim.records.control import encode_control_batch
from kafkasim.records.framing import decode_header
from kafkasim.storage.txn_index import AbortedTxn
from kafkasim.types import ConsumerGroupMetadata, TopicPartition

TP0 = TopicPartition("t", 0)


@pytest.fixture
def b(tmp_path):
    with Broker(tmp_path / "d", clock=MockClock(1_700_000_000_000)) as broker:
        broker.create_topic("t", 1)
        yield broker


def read(b, level):
    c = Consumer(b, isolation_level=level, auto_offset_reset="earliest")
    c.assign([TP0])
    got = [(r.offset, r.value) for rs in c.poll(max_records=1000).values() for r in rs]
    return got, c.position(TP0)


def mixed(b):
    """committed a (0) COMMIT (1), aborted b (2) ABORT (3), plain c (4), open d (5)."""
    p = Producer(b, transactional_id="tx")
    p.init_transactions()
    p.begin_transaction(); p.send("t", b"a"); p.commit_transaction()
    p.begin_transaction(); p.send("t", b"b"); p.abort_transaction()
    plain = Producer(b)
    plain.send("t", b"c"); plain.flush()
    p.begin_transaction(); p.send("t", b"d"); p.flush()
    return p


def test_read_committed_drops_aborted_records_and_stops_at_the_open_transaction(b):
    p = mixed(b)
    assert read(b, "read_committed") == ([(0, b"a"), (4, b"c")], 5)
    p.commit_transaction()
    assert read(b, "read_committed") == ([(0, b"a"), (4, b"c"), (5, b"d")], 7)   # past the marker at 6


def test_read_uncommitted_sees_aborted_and_open_records_but_never_a_marker(b):
    mixed(b)
    assert read(b, "read_uncommitted") == ([(0, b"a"), (2, b"b"), (4, b"c"), (5, b"d")], 6)


def test_a_poll_ending_on_markers_moves_the_position_past_them(b):
    p = Producer(b, transactional_id="tx")
    p.init_transactions()
    p.begin_transaction(); p.send("t", b"x"); p.abort_transaction()
    for level in ("read_committed", "read_uncommitted"):
        got, pos = read(b, level)
        assert pos == 2 and got == ([] if level == "read_committed" else [(0, b"x")])


def test_the_aborted_list_rule_on_interleaved_producers():
    """Producer 7's transaction at 0 aborts (marker at 3); producer 8's at 1 commits (marker
    at 2); producer 7 then writes again at 4 (a new transaction, later committed)."""
    def data(base, pid, value):
        raw = rb.encode_batch(base, [(0, 1, None, value, ())], producer_id=pid, producer_epoch=0,
                              base_sequence=base, attributes=rb.ATTR_TRANSACTIONAL)
        return decode_header(raw, 0), raw

    def marker(base, pid, commit):
        raw = encode_control_batch(pid, 0, commit, 0, 1, base_offset=base)
        return decode_header(raw, 0), raw

    batches = [data(0, 7, b"a7"), data(1, 8, b"b8"), marker(2, 8, True), marker(3, 7, False), data(4, 7, b"c7")]
    cols, nxt = batches_to_columns(batches, True, [AbortedTxn(7, 0, 3, 5)])
    assert cols[3] == [b"b8", b"c7"] and cols[0] == [1, 4] and nxt == 5
    cols, _ = batches_to_columns(batches, False, None)
    assert cols[3] == [b"a7", b"b8", b"c7"]


def test_group_metadata_names_the_group_and_member(b):
    assert Consumer(b).group_metadata() == ConsumerGroupMetadata(None)
    c = Consumer(b, "t", group_id="g", group_instance_id="i-1")
    md = c.group_metadata()
    assert md.group_id == "g" and md.group_instance_id == "i-1"


def test_end_offsets_and_look_ups_by_time_under_read_committed_stop_at_the_lso(b):
    """Kafka's consumer sends ListOffsets with its isolation level: under read_committed
    ``end_offsets`` is the last stable offset, ``offsets_for_times`` finds nothing at or past
    it, and ``seek_to_end`` goes to it; read_uncommitted answers by the high watermark."""
    t = 1_700_000_000_000
    p = Producer(b, transactional_id="tx")
    p.init_transactions()
    p.begin_transaction(); p.send("t", b"a", timestamp_ms=t + 1); p.commit_transaction()   # 0, marker 1
    p.begin_transaction(); p.send("t", b"d", timestamp_ms=t + 5); p.flush()                # 2, open
    rc = Consumer(b, isolation_level="read_committed")
    ru = Consumer(b, isolation_level="read_uncommitted")
    assert rc.end_offsets([TP0]) == {TP0: 2} and ru.end_offsets([TP0]) == {TP0: 3}
    assert rc.offsets_for_times({TP0: t + 5}) == {TP0: None}
    assert ru.offsets_for_times({TP0: t + 5})[TP0].offset == 2
    assert rc.offsets_for_times({TP0: t})[TP0].offset == 0
    assert b.list_offsets("t", 0, -3, isolation_level=1) == (-1, -1)    # max timestamp: the open record
    rc.assign([TP0]); rc.seek_to_end(TP0)
    assert rc.position(TP0) == 2
    p.commit_transaction()                                               # marker 3: LSO = HW = 4
    assert rc.end_offsets([TP0]) == {TP0: 4}
    assert rc.offsets_for_times({TP0: t + 5})[TP0].offset == 2
    assert b.list_offsets("t", 0, -3, isolation_level=1) == (2, t + 5)


def test_list_offsets_refuses_an_isolation_level_that_is_not_0_or_1(b):
    with pytest.raises(InvalidArgumentError, match="isolation_level"):
        b.list_offsets("t", 0, -1, isolation_level=2)
