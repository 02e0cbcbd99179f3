"""Bad input at Producer.send and the producer's other entry points: a kafkasim error naming
the bad value, raised in send() before anything is queued, and nothing poisoned (hardening
issue: the one record rule, kafkasim.records.validation; arguments, kafkasim.arguments)."""

from __future__ import annotations

import pytest

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.errors import InvalidArgumentError, InvalidRecordError, InvalidTimestampError
from kafkasim.producer import Producer

T0 = 1_700_000_000_000


@pytest.fixture
def b(tmp_path):
    broker = Broker(tmp_path / "data", clock=MockClock(T0))
    broker.create_topic("t", 2)
    yield broker
    broker.close()


@pytest.mark.parametrize("ts", [2**63, -1, -5, 1.5, "123", True])
def test_a_bad_timestamp_is_refused_at_send_and_does_not_poison_the_producer(b, ts):
    p = Producer(b, linger_ms=0)
    with pytest.raises(InvalidTimestampError, match=repr(ts) if not isinstance(ts, str) else "'123'"):
        p.send("t", value=b"x", partition=0, timestamp_ms=ts)
    futures = [p.send("t", value=b"v%d" % i, partition=0) for i in range(50)]
    p.flush()
    assert [f.get().offset for f in futures] == list(range(50))
    p.close()


@pytest.mark.parametrize("ts", [0, 2**63 - 1])
def test_the_timestamp_range_ends_are_accepted(b, ts):
    p = Producer(b, linger_ms=0)
    assert p.send("t", value=b"x", partition=0, timestamp_ms=ts).get().timestamp == ts
    assert b.fetch("t", 0, 0).records[0].timestamp == ts
    p.close()


def test_a_refused_record_takes_no_sequence_number(b):
    """The idempotent producer's per-partition sequences stay contiguous around refused sends."""
    p = Producer(b, linger_ms=60_000, enable_idempotence=True)
    p.send("t", value=b"a", partition=0)
    for bad in ({"timestamp_ms": 2**63}, {"headers": [("h", "str")]}, {"headers": [(b"k", b"v")]}):
        with pytest.raises((InvalidTimestampError, InvalidRecordError)):
            p.send("t", value=b"x", partition=0, **bad)
    p.send("t", value=b"b", partition=0)
    p.flush()
    assert [(r.value, r.sequence) for r in b.fetch("t", 0, 0).records] == [(b"a", 0), (b"b", 1)]
    p.close()


@pytest.mark.parametrize("headers,where", [
    ([("h", "strval")], "header 'h': value must be bytes or None, got str"),
    ([(b"hk", b"v")], "header 0: key must be str, got bytes"),
    ([("h",)], "header 0: expected a (key, value) pair"),
    ([(1, b"v")], "header 0: key must be str, got int"),
    ("h=v", "headers must be a sequence of (str, bytes) pairs, got str"),
    ({"h": b"v"}, "headers must be a sequence of (str, bytes) pairs, got dict"),
    ([("ok", b"v"), ("h", bytearray(b"v"))], "header 'h': value must be bytes or None, got bytearray"),
])
def test_headers_of_the_wrong_type_never_reach_the_log(b, headers, where):
    p = Producer(b, linger_ms=0)
    with pytest.raises(InvalidRecordError) as e:
        p.send("t", value=b"x", partition=0, headers=headers)
    assert where in str(e.value)
    with pytest.raises(InvalidRecordError) as e:
        b.append_records("t", 0, [(T0, None, b"x", headers)])
    assert where in str(e.value)
    p.send("t", value=b"ok", partition=0).get()
    assert [r.value for r in b.fetch("t", 0, 0).records] == [b"ok"]


def test_headers_may_be_any_sequence_of_pairs(b):
    p = Producer(b, linger_ms=0)
    p.send("t", value=b"1", partition=0, headers=[["a", b"x"], ("b", None)]).get()
    p.send("t", value=b"2", partition=0, headers=(h for h in [("c", b"y")])).get()
    p.send("t", value=b"3", partition=0, headers=[]).get()
    assert [r.headers for r in b.fetch("t", 0, 0).records] == [(("a", b"x"), ("b", None)), (("c", b"y"),), ()]
    p.close()


@pytest.mark.parametrize("call,name", [
    (lambda p: p.send(5, value=b"x"), "topic"),
    (lambda p: p.send(["t"], value=b"x"), "topic"),
    (lambda p: p.send("", value=b"x"), "topic"),
    (lambda p: p.flush("1"), "timeout"),
    (lambda p: p.flush(-1), "timeout"),
    (lambda p: p.close("soon"), "timeout"),
    (lambda p: p.poll("10"), "timeout_ms"),
    (lambda p: p.partitions_for(None), "topic"),
])
def test_bad_arguments_name_themselves(b, call, name):
    p = Producer(b, linger_ms=0)
    with pytest.raises(InvalidArgumentError, match=name):
        call(p)
    assert p.send("t", value=b"still fine", partition=1).get().offset == 0
    p.close()


def test_a_producer_needs_a_broker(tmp_path):
    with pytest.raises(InvalidArgumentError, match="broker must be a kafkasim Broker"):
        Producer(None)


def test_an_explicit_partition_of_the_wrong_type_is_named_with_its_type(b):
    with pytest.raises(InvalidArgumentError, match="Invalid partition: '0'"):
        Producer(b).send("t", value=b"v", partition="0")


def test_a_header_pair_changed_after_send_does_not_change_the_record(b):
    p = Producer(b, linger_ms=60_000)
    pair = ["h", b"v"]
    f = p.send("t", value=b"x", partition=0, headers=[pair])
    pair[1] = "not bytes"               # as Kafka's producer, send() took the record as it was
    p.flush()
    assert f.get().offset == 0
    assert b.fetch("t", 0, 0).records[0].headers == (("h", b"v"),)
    p.close()
