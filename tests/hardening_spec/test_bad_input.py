"""Bad input at the public entry points: a specific kafkasim error naming the bad value,
nothing written, nothing poisoned (hardening issue, cases 2, 3, 4, 6 and 9)."""

from __future__ import annotations

import glob
import json
import os

import pytest

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.consumer import Consumer
from kafkasim.errors import (
    InvalidArgumentError, InvalidRecordError, InvalidTimestampError, KafkaSimError, KafkaStorageError,
    RecordTooLargeError,
)
from kafkasim.producer import Producer
from kafkasim.types import TopicPartition

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


@pytest.mark.parametrize("headers,where", [
    ([("h", "strval")], "header 'h': value must be bytes or None, got str"),
    ([(b"hk", b"v")], "header 0: key must be str, got bytes"),
    ([("h",)], "header 0: expected a (key, value) pair"),
    ([(1, b"v")], "header 0: key must be str, got int"),
    ("h=v", "headers must be a sequence of (str, bytes) pairs, got str"),
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


def test_keys_and_values_must_be_bytes_for_the_broker(b):
    for bad in ("text", 5, bytearray(b"x")[0]):
        with pytest.raises(InvalidRecordError, match="value must be bytes or None"):
            b.append_records("t", 0, [(T0, None, bad, ())])
    assert b.list_offsets("t", 0, -1)[0] == 0


def test_one_oversized_record_fails_alone_and_its_batch_mates_are_written(b):
    b.alter_topic_configs("t", {"max.message.bytes": "2000"})
    p = Producer(b, linger_ms=60_000, batch_size=1_000_000, enable_idempotence=True)
    small = [p.send("t", value=b"s%d" % i, partition=0) for i in range(3)]
    big = p.send("t", value=b"x" * 5000, partition=0)
    tail = [p.send("t", value=b"t%d" % i, partition=0) for i in range(2)]
    p.flush()
    with pytest.raises(RecordTooLargeError):
        big.get()
    assert [f.get().offset for f in small + tail] == [0, 1, 2, 3, 4]
    assert [r.value for r in b.fetch("t", 0, 0).records] == [b"s0", b"s1", b"s2", b"t0", b"t1"]
    p.close()


def _meta_file(d):
    for path in glob.glob(os.path.join(d, "meta", "topics", "*.json")):
        with open(path) as f:
            if json.load(f)["name"] == "t":
                return path
    raise AssertionError("no metadata file for t")


@pytest.mark.parametrize("field,value,message", [
    ("name", "../escape", "invalid topic name '../escape'"),
    ("name", "", "invalid topic name ''"),
    ("partitions", -1, "partitions: -1"),
    ("partitions", "abc", "partitions: 'abc'"),
    ("partitions", 10**9, "partitions: 1000000000"),
    ("replication_factor", 0, "replication_factor: 0"),
    ("configs", {"segment.bytes": -5}, "segment.bytes"),
])
def test_metadata_is_validated_on_load_and_never_points_outside_the_data_dir(tmp_path, field, value, message):
    d = str(tmp_path / "data")
    with Broker(d) as b:
        b.create_topic("t", 2)
    path = _meta_file(d)
    with open(path) as f:
        raw = json.load(f)
    raw[field] = value
    with open(path, "w") as f:
        json.dump(raw, f)
    before = set(os.listdir(tmp_path))
    with pytest.raises(KafkaStorageError) as e:
        Broker(d)
    assert path in str(e.value) and message in str(e.value)
    assert set(os.listdir(tmp_path)) == before            # nothing created next to the data dir
    Broker(d + "-other").close()                            # and no lock left behind in the process


@pytest.mark.parametrize("data_dir", ["", None, 5])
def test_a_data_dir_must_be_a_non_empty_path(tmp_path, monkeypatch, data_dir):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidArgumentError, match="data_dir"):
        Broker(data_dir)
    assert os.listdir(tmp_path) == []


def test_create_topic_configs_must_be_a_mapping(b):
    with pytest.raises(InvalidArgumentError, match=r"configs must be a mapping of config names to values, got list"):
        b.create_topic("u", 1, configs=[("segment.bytes", 1000)])
    assert "u" not in b.list_topics()


@pytest.mark.parametrize("offset", ["5", 1.5, None, True])
def test_fetch_offsets_must_be_integers(b, offset):
    with pytest.raises(InvalidArgumentError, match="offset"):
        b.fetch("t", 0, offset)
    with pytest.raises(InvalidArgumentError, match="partition"):
        b.fetch("t", "0", 0)


def test_commit_offsets_must_be_integers(b):
    c = Consumer(b, "t", group_id="g", clock=b.clock)
    with pytest.raises(InvalidArgumentError, match="'abc'"):
        c.commit({TopicPartition("t", 0): "abc"})
    with pytest.raises(InvalidArgumentError, match="'abc'"):
        b.offset_commit("g2", "", -1, {TopicPartition("t", 0): "abc"})
    c.close()

