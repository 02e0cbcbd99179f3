"""Batch splitting on RecordTooLargeError, as Kafka's Sender does (splitAndReenqueue on
MESSAGE_TOO_LARGE), and sequence numbers given back by a batch the broker refuses
(adjustSequencesDueToFailedBatch): producer/sender.py steps 4 and 5."""

from __future__ import annotations

import pytest

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.errors import InvalidRecordError, RecordTooLargeError
from kafkasim.producer import Producer

T0 = 1_700_000_000_000


@pytest.fixture
def b(tmp_path):
    broker = Broker(tmp_path / "data", clock=MockClock(T0))
    broker.create_topic("t", 2, configs={"max.message.bytes": "2000"})
    yield broker
    broker.close()


def written(b, p=0):
    return [(r.offset, r.value, r.sequence) for r in b.fetch("t", p, 0, 10_000_000).records]


@pytest.mark.parametrize("idempotent", [True, False])
def test_one_oversized_record_fails_alone_and_its_batch_mates_are_written(b, idempotent):
    p = Producer(b, linger_ms=60_000, batch_size=1_000_000, enable_idempotence=idempotent,
                 acks="all" if idempotent else "1")
    small = [p.send("t", value=b"s%d" % i, partition=0) for i in range(3)]
    big = p.send("t", value=b"x" * 5000, partition=0)
    tail = [p.send("t", value=b"t%d" % i, partition=0) for i in range(2)]
    p.flush()
    with pytest.raises(RecordTooLargeError, match="max.message.bytes"):
        big.get()
    assert big.failed() and isinstance(big.exception, RecordTooLargeError) and big.value is None
    assert [f.get().offset for f in small + tail] == [0, 1, 2, 3, 4]
    assert all(f.succeeded() for f in small + tail)
    assert [v for _, v, _ in written(b)] == [b"s0", b"s1", b"s2", b"t0", b"t1"]
    if idempotent:      # the sequences on the log stay contiguous: the refused record gave its back
        assert [s for _, _, s in written(b)] == [0, 1, 2, 3, 4]
    m = p.metrics()["producer-metrics"]
    assert m["batch-split-total"] >= 1 and m["record-error-total"] == 1 and m["record-send-total"] == 6
    p.close()


def test_a_batch_over_the_topic_limit_whose_records_fit_is_written_in_pieces(b):
    p = Producer(b, linger_ms=60_000, batch_size=1_000_000)
    futures = [p.send("t", value=bytes([65 + i]) * 600, partition=0) for i in range(6)]
    p.flush()
    assert [f.get().offset for f in futures] == list(range(6))
    assert [v[:1] for _, v, _ in written(b)] == [b"A", b"B", b"C", b"D", b"E", b"F"]
    assert [s for _, _, s in written(b)] == list(range(6))
    p.close()


def test_several_oversized_records_fail_alone_however_deep_the_split(b):
    p = Producer(b, linger_ms=60_000, batch_size=1_000_000)
    sizes = [10, 3000, 10, 10, 10, 10, 2500, 10, 10, 4000]
    futures = [p.send("t", value=bytes([65 + i]) * n, partition=0) for i, n in enumerate(sizes)]
    p.flush()
    ok = [i for i, n in enumerate(sizes) if n < 2000]
    for i, f in enumerate(futures):
        if i in ok:
            assert f.get().offset == ok.index(i)
        else:
            with pytest.raises(RecordTooLargeError):
                f.get()
    assert [v[:1] for _, v, _ in written(b)] == [bytes([65 + i]) for i in ok]
    assert [s for _, _, s in written(b)] == list(range(len(ok)))
    p.close()


def test_callbacks_and_errbacks_get_each_records_own_outcome(b):
    p = Producer(b, linger_ms=60_000, batch_size=1_000_000)
    seen = []
    for i, n in enumerate([5, 5000, 5]):
        f = p.send("t", value=b"v" * n, partition=0)
        f.add_callback(lambda i, md: seen.append((i, "ok", md.offset)), i)
        f.add_errback(lambda i, exc: seen.append((i, type(exc).__name__)), i)
    p.flush()
    assert sorted(seen) == [(0, "ok", 0), (1, "RecordTooLargeError"), (2, "ok", 1)]
    p.close()


def test_later_batches_keep_their_place_and_sequences_after_a_split(b):
    """Batches already closed behind the split one are written after its pieces, in order."""
    p = Producer(b, linger_ms=60_000, batch_size=2_500)
    values = [b"a" * 700, b"b" * 700, b"c" * 700, b"d" * 10, b"e" * 3000, b"f" * 10, b"g" * 700]
    futures = [p.send("t", value=v, partition=0) for v in values]
    p.flush()
    with pytest.raises(RecordTooLargeError):
        futures[4].get()
    kept = [v[:1] for v in values if len(v) < 2000]
    assert [v[:1] for _, v, _ in written(b)] == kept
    assert [s for _, _, s in written(b)] == list(range(len(kept)))
    assert [f.get().offset for i, f in enumerate(futures) if i != 4] == list(range(len(kept)))
    p.close()


def test_a_refused_batch_no_longer_fails_the_idempotent_batches_behind_it(tmp_path):
    """A non-retriable refusal (here: a keyless record on a compacted topic) means nothing of the
    batch was written, so the batches queued behind it take its sequence numbers and go on."""
    with Broker(tmp_path / "data", clock=MockClock(T0)) as b:
        b.create_topic("c", 1, configs={"cleanup.policy": "compact"})
        p = Producer(b, linger_ms=60_000, batch_size=100, enable_idempotence=True)
        later = {}

        def send_more(_md):
            # runs inside the sender's delivery: these batches close now and are drained
            # together afterwards, the refused one ahead of the good one
            later["bad"] = p.send("c", key=None, value=b"v" * 200, partition=0)
            later["good"] = [p.send("c", key=b"k%d" % i, value=b"v" * 40, partition=0) for i in (1, 2)]

        p.send("c", key=b"k0", value=b"v" * 40, partition=0).add_callback(send_more)
        p.flush()
        with pytest.raises(InvalidRecordError, match="without key"):
            later["bad"].get()
        assert [f.get().offset for f in later["good"]] == [1, 2]
        assert [(r.key, r.sequence) for r in b.fetch("c", 0, 0).records] == [(b"k0", 0), (b"k1", 1), (b"k2", 2)]
        p.close()
